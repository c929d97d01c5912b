// The pieces of tracing on their own: W3C traceparent validation and
// tracestate bounds (trace-context.ts), the bounded span queue, and the OTLP
// JSON body (ids in hex, times as decimal strings of ns).
import { strict as assert } from 'node:assert'
import { test } from 'node:test'
import { TRACESTATE_MAX, boundTracestate, formatTraceparent, newSpanId, newTraceId, sampledFlag, validTraceparent } from '../../core/worker/trace/trace-context.js'
import { SpanQueue } from '../../core/worker/trace/span-queue.js'
import { Span } from '../../core/worker/trace/span.js'
import { exportRequest, spanName } from '../../core/worker/trace/otlp-json.js'

const T = '4bf92f3577b34da6a3ce929d0e0e4736'
const P = '00f067aa0ba902b7'

test('traceparent: version 00, lower-case hex, non-zero ids, exact length', () => {
  assert.ok(validTraceparent(`00-${T}-${P}-01`))
  assert.ok(validTraceparent(`00-${T}-${P}-00`))
  for (const bad of [
    `01-${T}-${P}-01`, `ff-${T}-${P}-01`, `00-${T.toUpperCase()}-${P}-01`, `00-${T}-${P.toUpperCase()}-01`,
    `00-${'0'.repeat(32)}-${P}-01`, `00-${T}-${'0'.repeat(16)}-01`, `00-${T}-${P}-01-`, `00-${T}-${P}-1`, `00_${T}-${P}-01`,
    `00-${T}-${P}-0g`, '', ` 00-${T}-${P}-01`.slice(0, 55),
  ]) assert.equal(validTraceparent(bad), false, bad)
  assert.equal(sampledFlag(`00-${T}-${P}-01`), true)
  assert.equal(sampledFlag(`00-${T}-${P}-03`), true)
  assert.equal(sampledFlag(`00-${T}-${P}-02`), false)
  assert.equal(formatTraceparent(T, P, false), `00-${T}-${P}-00`)
})

test('tracestate: kept up to 512 characters, cut by whole entries past that', () => {
  assert.equal(boundTracestate('a=1,b=2'), 'a=1,b=2')
  const entries = Array.from({ length: 40 }, (_, i) => `k${i}=${'v'.repeat(20)}`)
  const cut = boundTracestate(entries.join(','))
  assert.ok(cut.length <= TRACESTATE_MAX && cut.length > TRACESTATE_MAX - 30)
  assert.ok(entries.join(',').startsWith(cut + ','))
  assert.equal(boundTracestate('x'.repeat(600)), '')
})

test('ids: random lower-case hex of the right length, never repeating', () => {
  const seen = new Set<string>()
  for (let i = 0; i < 1000; i++) {
    const t = newTraceId()
    const s = newSpanId()
    assert.match(t, /^[0-9a-f]{32}$/)
    assert.match(s, /^[0-9a-f]{16}$/)
    assert.ok(!seen.has(t))
    seen.add(t)
  }
})

test('span queue: bounded, oldest first, refuses when full, resizes keeping the oldest', () => {
  const q = new SpanQueue(3)
  const spans = Array.from({ length: 5 }, (_, i) => Object.assign(new Span(), { path: `/${i}` }))
  assert.deepEqual(spans.map((s) => q.push(s)), [true, true, true, false, false])
  assert.deepEqual(q.take(2).map((s) => s.path), ['/0', '/1'])
  assert.ok(q.push(spans[3]!))
  assert.ok(q.push(spans[4]!))
  assert.equal(q.size, 3)
  assert.equal(q.resize(2), 1)
  assert.deepEqual(q.take(10).map((s) => s.path), ['/2', '/3'])
  assert.equal(q.size, 0)
})

test('OTLP JSON: hex ids, ns times as strings, SERVER kind, ERROR on 5xx, _OTHER for an unknown method', () => {
  const s = Object.assign(new Span(), {
    traceId: T, spanId: P, sampled: true, startUs: 1_700_000_000_123_456, endUs: 1_700_000_000_223_456,
    method: 'PURGE', path: '/x"\\', traceState: 'a="b"', scheme: 'https', protocolVersion: '1.1', status: 503, router: 'r', errorCode: 'LB_ERR_NO_SERVER',
  })
  assert.equal(spanName(s), 'HTTP r')
  const body = JSON.parse(exportRequest({ serviceName: 'lb', attributes: { 'service.name': 'ignored', 'we"ird': 'x"\n' } }, [s]))
  const resource = body.resourceSpans[0].resource.attributes
  assert.deepEqual(resource, [{ key: 'service.name', value: { stringValue: 'lb' } }, { key: 'we"ird', value: { stringValue: 'x"\n' } }])
  const j = body.resourceSpans[0].scopeSpans[0].spans[0]
  assert.equal(j.traceId, T)
  assert.equal(j.parentSpanId, undefined)
  assert.equal(j.kind, 2)
  assert.equal(j.startTimeUnixNano, '1700000000123456000')
  assert.equal(j.endTimeUnixNano, '1700000000223456000')
  assert.deepEqual(j.status, { code: 2 })
  const a = Object.fromEntries(j.attributes.map((x: { key: string, value: Record<string, string> }) => [x.key, Object.values(x.value)[0]]))
  assert.equal(a['url.path'], '/x"\\')
  assert.equal(j.traceState, 'a="b"')
  assert.equal(a['http.request.method'], '_OTHER')
  assert.equal(a['http.request.method_original'], 'PURGE')
  assert.equal(a['http.response.status_code'], '503')
  assert.equal(a['error.type'], 'LB_ERR_NO_SERVER')
})
