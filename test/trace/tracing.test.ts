// [tracing] end to end: a real lb between real clients, a real backend and a
// small OTLP/HTTP receiver (collector.ts). W3C traceparent/tracestate read and
// forwarded, parent-based sampling, the span's attributes, OTLP/HTTP JSON
// export with its headers.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, freePort, request, startBackend, startLb, waitFor } from '../helpers.js'
import { type Collector, type OtlpSpan, attr, startCollector } from './collector.js'
import { config, tracingSection } from './util.js'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT = '00f067aa0ba902b7'
const TP = (flags = '01'): string => `00-${TRACE}-${PARENT}-${flags}`
const VALID_TP = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/

/** the last request the backend saw with this path */
function seen (b: Backend, url: string): http.IncomingHttpHeaders {
  const r = [...b.requests].reverse().find((x) => x.url === url)
  assert.ok(r !== undefined, `the backend saw no ${url}`)
  return r.headers
}

const spanOf = (c: Collector, path: string): Promise<OtlpSpan> =>
  waitFor(() => c.spans.find((s) => attr(s, 'url.path') === path), `a span for ${path}`, 10_000)

describe('tracing: propagation, sampling, spans', () => {
  let backend: Backend
  let collector: Collector
  let lb: Lb

  before(async () => {
    backend = await startBackend('b1')
    collector = await startCollector()
    lb = await startLb(config(backend.address, await freePort(), tracingSection(collector.endpoint)))
  })
  after(async () => {
    await lb?.stop()
    await backend?.close()
    await collector?.close()
  })

  test('a valid traceparent: the backend gets the same trace with lb\'s span as parent, and the span is the client\'s child', async () => {
    const r = await request(`${lb.url}/a?q=1`, { headers: { traceparent: TP(), tracestate: 'vendor=x,other=y', 'user-agent': 'trace-test/1' } })
    assert.equal(r.status, 200)
    const h = seen(backend, '/a?q=1')
    const m = VALID_TP.exec(String(h.traceparent))
    assert.ok(m !== null, `traceparent upstream: ${h.traceparent}`)
    assert.equal(m[1], TRACE)
    assert.notEqual(m[2], PARENT)
    assert.equal(m[3], '01')
    assert.equal(h.tracestate, 'vendor=x,other=y')
    const s = await spanOf(collector, '/a')
    assert.equal(s.traceId, TRACE)
    assert.equal(s.parentSpanId, PARENT)
    assert.equal(s.spanId, m[2])
    assert.equal(s.traceState, 'vendor=x,other=y')
    assert.equal(s.kind, 2) // SERVER
    assert.equal(s.name, 'GET web')
    assert.deepEqual(s.status, {})
    assert.equal(attr(s, 'http.request.method'), 'GET')
    assert.equal(attr(s, 'url.scheme'), 'http')
    assert.equal(attr(s, 'network.protocol.version'), '1.1')
    assert.equal(attr(s, 'http.response.status_code'), '200')
    assert.equal(attr(s, 'server.address'), '127.0.0.1')
    assert.equal(attr(s, 'client.address'), '127.0.0.1')
    assert.equal(attr(s, 'user_agent.original'), 'trace-test/1')
    assert.equal(attr(s, 'lb.router'), 'web')
    assert.equal(attr(s, 'lb.service'), 'web')
    assert.equal(attr(s, 'lb.server'), 'b1')
    assert.equal(attr(s, 'lb.server.address'), backend.address)
    assert.equal(attr(s, 'error.type'), '')
    assert.ok(BigInt(s.endTimeUnixNano) >= BigInt(s.startTimeUnixNano))
    assert.ok(Math.abs(Number(BigInt(s.startTimeUnixNano) / 1_000_000n) - Date.now()) < 60_000, 'start time is wall-clock ns')
    assert.equal(s.resource['service.name'], 'edge')
    assert.equal(s.resource['deployment.environment'], 'test')
    // OTLP/HTTP JSON, with the configured headers
    assert.match(collector.posts[0]!.contentType, /^application\/json/)
    assert.equal(collector.posts[0]!.headers.authorization, 'Bearer T0KEN-SECRET')
    assert.ok(!lb.log().includes('T0KEN-SECRET'), 'the export headers are never logged')
  })

  test('no traceparent, sample_rate 1 (the default): lb starts a sampled trace', async () => {
    await request(`${lb.url}/new`)
    const h = seen(backend, '/new')
    const m = VALID_TP.exec(String(h.traceparent))
    assert.ok(m !== null, `traceparent upstream: ${h.traceparent}`)
    assert.equal(m[3], '01')
    assert.equal(h.tracestate, undefined)
    const s = await spanOf(collector, '/new')
    assert.equal(s.traceId, m[1])
    assert.equal(s.spanId, m[2])
    assert.equal(s.parentSpanId ?? '', '')
  })

  test('an unsampled parent: forwarded with flag 00, no span (parent-based sampling)', async () => {
    await request(`${lb.url}/unsampled`, { headers: { traceparent: TP('00') } })
    const m = VALID_TP.exec(String(seen(backend, '/unsampled').traceparent))
    assert.ok(m !== null)
    assert.equal(m[1], TRACE)
    assert.equal(m[3], '00')
    await request(`${lb.url}/after-unsampled`) // exported after it by the one worker
    await spanOf(collector, '/after-unsampled')
    assert.equal(collector.spans.filter((s) => attr(s, 'url.path') === '/unsampled').length, 0)
  })

  test('invalid traceparents are not forwarded: a new trace starts, the tracestate is dropped', async () => {
    const bad = {
      version: `01-${TRACE}-${PARENT}-01`,
      ff: `ff-${TRACE}-${PARENT}-01`,
      upper: `00-${TRACE.toUpperCase()}-${PARENT}-01`,
      zeroTrace: `00-${'0'.repeat(32)}-${PARENT}-01`,
      zeroParent: `00-${TRACE}-${'0'.repeat(16)}-01`,
      long: `${TP()}-extra`,
      short: TP().slice(0, 54),
      nonHex: `00-${TRACE.slice(0, 31)}g-${PARENT}-01`,
    }
    for (const [name, tp] of Object.entries(bad)) {
      await request(`${lb.url}/bad-${name}`, { headers: { traceparent: tp, tracestate: 'vendor=x' } })
      const h = seen(backend, `/bad-${name}`)
      const m = VALID_TP.exec(String(h.traceparent))
      assert.ok(m !== null, `${name}: traceparent upstream ${h.traceparent}`)
      assert.notEqual(m[1], TRACE, `${name}: a new trace`)
      assert.equal(h.tracestate, undefined, `${name}: no tracestate without a valid parent`)
      const s = await spanOf(collector, `/bad-${name}`)
      assert.equal(s.parentSpanId ?? '', '', `${name}: a root span`)
    }
    // two traceparent fields: which one is meant is unknown, so neither is
    const twice = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${lb.url}/bad-twice`, { agent: false, headers: ['host', '127.0.0.1', 'traceparent', TP(), 'traceparent', TP()] as unknown as http.OutgoingHttpHeaders }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode!)) })
      req.on('error', reject)
      req.end()
    })
    assert.equal(twice, 200)
    assert.notEqual(VALID_TP.exec(String(seen(backend, '/bad-twice').traceparent))?.[1], TRACE)
  })

  test('a 502 (no server answers): status ERROR, error.type lb\'s code', async () => {
    const r = await request(`${lb.url}/down/x`, { headers: { traceparent: TP() } })
    assert.equal(r.status, 502)
    const s = await spanOf(collector, '/down/x')
    assert.equal(s.name, 'GET down')
    assert.equal(attr(s, 'http.response.status_code'), '502')
    assert.deepEqual(s.status, { code: 2 })
    assert.match(attr(s, 'error.type'), /^LB_ERR_/)
    assert.equal(attr(s, 'lb.service'), 'down')
    assert.equal(s.parentSpanId, PARENT)
  })

  test('a WebSocket upgrade carries lb\'s traceparent', async () => {
    const ws = http.createServer()
    let upgradeHeaders: http.IncomingHttpHeaders | null = null
    ws.on('upgrade', (req, socket) => {
      upgradeHeaders = req.headers
      socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n')
    })
    await new Promise<void>((resolve) => ws.listen(0, '127.0.0.1', resolve))
    const wsPort = (ws.address() as { port: number }).port
    const lbWs = await startLb(config(`127.0.0.1:${wsPort}`, await freePort(), tracingSection(collector.endpoint)))
    try {
      await new Promise<void>((resolve, reject) => {
        const req = http.request(`${lbWs.url}/ws`, {
          agent: false,
          headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13', traceparent: TP() },
        })
        req.on('upgrade', (_res, socket) => { socket.destroy(); resolve() })
        req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)))
        req.on('error', reject)
        req.end()
      })
      const h = upgradeHeaders as http.IncomingHttpHeaders | null
      const m = VALID_TP.exec(String(h?.traceparent))
      assert.ok(m !== null, `traceparent on the upgrade: ${h?.traceparent}`)
      assert.equal(m[1], TRACE)
      assert.notEqual(m[2], PARENT)
      const s = await spanOf(collector, '/ws')
      assert.equal(s.spanId, m[2])
      assert.equal(attr(s, 'http.response.status_code'), '101')
    } finally {
      await lbWs.stop()
      ws.close()
    }
  })
})
