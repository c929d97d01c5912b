// [tracing] off (absent) changes nothing a backend sees; a reload (SIGHUP)
// turns it on and off; sample_rate 0 records no trace lb starts, yet the
// backend still gets lb's traceparent (flag 00) and a sampled parent is still
// followed (parent-based sampling, as OpenTelemetry's default and Traefik).
import { strict as assert } from 'node:assert'
import { test } from 'node:test'
import { type Backend, freePort, reloadApplied, request, startBackend, startLb, waitFor } from '../helpers.js'
import { attr, startCollector } from './collector.js'
import { config, tracingSection } from './util.js'

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
const VALID_TP = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/

const headersOf = (b: Backend, url: string): Record<string, unknown> => {
  const r = b.requests.find((x) => x.url === url)
  assert.ok(r !== undefined, `the backend saw no ${url}`)
  return r.headers
}

test('SIGHUP turns tracing on and off; off, the trace fields pass as the client sent them and none is added', async (t) => {
  const backend = await startBackend('b1')
  const collector = await startCollector()
  t.after(async () => { await backend.close(); await collector.close() })
  const dead = await freePort()
  const lb = await startLb(config(backend.address, dead, ''))
  t.after(() => lb.stop())
  const off = async (tag: string): Promise<void> => {
    await request(`${lb.url}/${tag}-passed`, { headers: { traceparent: TP, tracestate: 'a=1' } })
    assert.equal(headersOf(backend, `/${tag}-passed`).traceparent, TP)
    assert.equal(headersOf(backend, `/${tag}-passed`).tracestate, 'a=1')
    await request(`${lb.url}/${tag}-none`)
    assert.equal(headersOf(backend, `/${tag}-none`).traceparent, undefined)
  }
  await off('off1')

  lb.write(config(backend.address, dead, tracingSection(collector.endpoint)))
  await reloadApplied(lb)
  await request(`${lb.url}/on`, { headers: { traceparent: TP } })
  const m = VALID_TP.exec(String(headersOf(backend, '/on').traceparent))
  assert.ok(m !== null)
  assert.notEqual(m[2], '00f067aa0ba902b7')
  await waitFor(() => collector.spans.find((s) => attr(s, 'url.path') === '/on'), 'the span once tracing is on', 10_000)

  lb.write(config(backend.address, dead, ''))
  await reloadApplied(lb)
  await off('off2')
})

test('sample_rate 0: no span for a trace lb starts, flag 00 upstream; a sampled parent is followed', async (t) => {
  const backend = await startBackend('b1')
  const collector = await startCollector()
  t.after(async () => { await backend.close(); await collector.close() })
  const lb = await startLb(config(backend.address, await freePort(), tracingSection(collector.endpoint, 'sample_rate = 0.0')))
  t.after(() => lb.stop())
  for (let i = 0; i < 5; i++) {
    await request(`${lb.url}/unsampled-${i}`)
    const m = VALID_TP.exec(String(headersOf(backend, `/unsampled-${i}`).traceparent))
    assert.ok(m !== null, 'lb\'s traceparent goes upstream, sampled or not')
    assert.equal(m[3], '00')
  }
  await request(`${lb.url}/parent-sampled`, { headers: { traceparent: TP } })
  assert.equal(VALID_TP.exec(String(headersOf(backend, '/parent-sampled').traceparent))?.[3], '01')
  // one worker exports in order: once this span is in, the ones before it would be too
  await waitFor(() => collector.spans.find((s) => attr(s, 'url.path') === '/parent-sampled'), 'the span of the sampled parent', 10_000)
  assert.deepEqual(collector.spans.map((s) => attr(s, 'url.path')), ['/parent-sampled'])
})

test('a request in flight when a reload turns tracing off still gets its span, and lb carries on', async (t) => {
  let release = (): void => {}
  const released = new Promise<void>((resolve) => { release = resolve })
  const backend = await startBackend('b1', (req, res) => {
    if (req.url === '/held') void released.then(() => res.end('ok'))
    else res.end('ok')
  })
  const collector = await startCollector()
  t.after(async () => { await backend.close(); await collector.close() })
  const dead = await freePort()
  const lb = await startLb(config(backend.address, dead, tracingSection(collector.endpoint)))
  t.after(() => lb.stop())
  const pending = request(`${lb.url}/held`)
  await waitFor(() => backend.requests.some((r) => r.url === '/held'), 'the held request at the backend')
  lb.write(config(backend.address, dead, ''))
  await reloadApplied(lb)
  release()
  assert.equal((await pending).status, 200)
  await waitFor(() => collector.spans.find((s) => attr(s, 'url.path') === '/held'), 'the span of the request that began with tracing on', 10_000)
  assert.equal((await request(`${lb.url}/after`)).status, 200)
  assert.equal(headersOf(backend, '/after').traceparent, undefined)
})
