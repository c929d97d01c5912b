// [tracing] export when the collector misbehaves: down (its port closed), back
// on the same port, slow (no answer within export_timeout); requests are served
// all along, what a worker holds stays bounded (drops counted on /metrics),
// one warning per outage. On SIGTERM the queued spans leave before lb exits.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, freePort, request, startBackend, startLb, waitFor } from '../helpers.js'
import { type Collector, attr, startCollector } from './collector.js'
import { config, tracingSection } from './util.js'

const WARN = /"msg":"tracing: the collector does not take spans[^\n]*/g

async function metric (lb: Lb, name: string): Promise<number> {
  const body = (await request(`http://127.0.0.1:${await lb.portOf('dashboard')}/metrics`)).body
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(body)
  assert.ok(m !== null, `${name} in /metrics`)
  return Number(m[1])
}

const DASHBOARD = `
[dashboard]
address = "127.0.0.1:0"
metrics = true
api = true
insecure = true
`

describe('tracing: a collector down, back, slow', () => {
  let backend: Backend
  let collector: Collector
  let lb: Lb

  before(async () => {
    backend = await startBackend('b1')
    collector = await startCollector()
    const bounds = 'max_queue_spans = 5\nbatch_size = 5\nexport_timeout = "300ms"'
    lb = await startLb(config(backend.address, await freePort(), tracingSection(collector.endpoint, bounds)) + DASHBOARD)
  })
  after(async () => {
    await lb?.stop()
    await backend?.close()
    await collector?.close()
  })

  test('down: requests are served, spans over the bound are dropped and counted, one warning; back: the held spans arrive', async () => {
    await collector.down()
    assert.equal((await request(`${lb.url}/first`)).status, 200)
    await lb.logMatching(WARN)
    for (let i = 0; i < 20; i++) assert.equal((await request(`${lb.url}/while-down-${i}`)).status, 200)
    // one span in the failed batch, 5 in the queue: at least 15 of the 20 dropped
    await waitFor(async () => await metric(lb, 'lb_tracing_spans_dropped_total') >= 15, 'drops counted on /metrics')
    assert.equal((lb.log().match(WARN) ?? []).length, 1, 'one warning per outage, not one per span')
    assert.ok(!lb.log().includes('T0KEN-SECRET'))
    await collector.up()
    await waitFor(() => collector.spans.some((s) => attr(s, 'url.path') === '/first'), 'the retried batch once the collector is back', 20_000)
    await waitFor(() => collector.spans.filter((s) => attr(s, 'url.path').startsWith('/while-down-')).length >= 5, 'the queued spans', 20_000)
    await lb.logMatching(/"msg":"tracing: the collector accepts spans again"[^\n]*"dropped":(1[5-9]|[2-9]\d)/)
    assert.ok(await metric(lb, 'lb_tracing_spans_exported_total') >= 6)
  })

  test('slow (no answer within export_timeout): requests are served, the batch is sent again once it answers', async () => {
    collector.hold()
    const before = (lb.log().match(WARN) ?? []).length
    assert.equal((await request(`${lb.url}/slow-1`)).status, 200)
    await waitFor(() => (lb.log().match(WARN) ?? []).length > before && /no answer within 300 ms \(export_timeout\)/.test(lb.log()), 'a warning naming the time-out')
    for (let i = 0; i < 5; i++) assert.equal((await request(`${lb.url}/slow-more-${i}`)).status, 200)
    collector.release()
    await waitFor(() => collector.spans.some((s) => attr(s, 'url.path') === '/slow-more-4'), 'spans once the collector answers again', 20_000)
  })

  test('the dashboard API\'s overview names the tracing exporter as Traefik does', async () => {
    const r = await request(`http://127.0.0.1:${await lb.portOf('dashboard')}/api/overview`)
    assert.equal((JSON.parse(r.body) as { features: { tracing: string } }).features.tracing, 'OTLP')
  })

  test('refused (HTTP 400): the batch is dropped and counted, not sent again', async () => {
    const dropped = await metric(lb, 'lb_tracing_spans_dropped_total')
    const posts = collector.posts.length
    collector.refuse(400)
    assert.equal((await request(`${lb.url}/refused`)).status, 200)
    await waitFor(async () => await metric(lb, 'lb_tracing_spans_dropped_total') === dropped + 1, 'the refused span counted dropped')
    await lb.logMatching(/"msg":"tracing: the collector does not take spans"[^\n]*"reason":"HTTP 400","spans":"dropped \(counted\)"/)
    collector.refuse(0)
    assert.equal((await request(`${lb.url}/after-refused`)).status, 200)
    await waitFor(() => collector.spans.some((s) => attr(s, 'url.path') === '/after-refused'), 'the next span')
    assert.equal(collector.posts.length, posts + 2, 'the refused batch was not sent again')
    assert.ok(!collector.spans.some((s) => attr(s, 'url.path') === '/refused'))
  })
})

test('SIGTERM: spans still queued reach the collector before lb exits', async (t) => {
  const backend = await startBackend('b1')
  const collector = await startCollector()
  t.after(async () => { await backend.close(); await collector.close() })
  const tracing = tracingSection(collector.endpoint).replace('flush_interval = "50ms"', 'flush_interval = "1h"')
  const lb = await startLb(config(backend.address, await freePort(), tracing))
  t.after(() => lb.stop('SIGKILL'))
  for (let i = 0; i < 3; i++) assert.equal((await request(`${lb.url}/term-${i}`)).status, 200)
  assert.equal(collector.spans.length, 0, 'nothing exported before the hour passes')
  assert.equal(await lb.stop(), 0)
  assert.deepEqual(collector.spans.map((s) => attr(s, 'url.path')).sort(), ['/term-0', '/term-1', '/term-2'])
})
