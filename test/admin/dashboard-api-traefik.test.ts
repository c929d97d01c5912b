// The dashboard API in Traefik's words where the issue found lb's own:
// /api/tcp/... and /api/udp/... are served (TCP routers and services of lb's
// TCP entry points; UDP always empty) and counted in /api/overview,
// durations read as Go's ("1s", "50s", never "1000ms"), and rateLimit's
// options are Traefik's average, period and burst.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { backends, json, startAdminLb } from './util.js'
import { goDuration } from '../../core/admin/traefik/traefik-view.js'

test('Go durations', () => {
  assert.deepEqual([0, 5, 500, 1000, 1500, 50_000, 60_000, 90_000, 3_600_000, 3_723_000].map(goDuration),
    ['0s', '5ms', '500ms', '1s', '1.5s', '50s', '1m0s', '1m30s', '1h0m0s', '1h2m3s'])
})

test('dashboard API: TCP and UDP sections, Go durations, Traefik middleware option names', async (t) => {
  const [b1, b2] = await backends(2)
  const a = await startAdminLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.db]
address = "127.0.0.1:0"
protocol = "tcp"
service = "db"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
middlewares = ["limit", "slow", "gzip"]
[middlewares.limit]
type = "rateLimit"
average = 50
burst = 100
[middlewares.slow]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 100
period = "10s"
[middlewares.gzip]
type = "compress"
[services.web]
[[services.web.servers]]
name = "w1"
address = "${b1!.address}"
check = false
[services.db]
[[services.db.servers]]
name = "d1"
address = "${b2!.address}"
[services.db.health_check]
type = "tcp"
interval = "90s"
timeout = "1500ms"
`)
  t.after(async () => { await a.lb.stop(); await b1!.close(); await b2!.close() })

  let r = await json(`${a.dash}/api/tcp/routers`)
  assert.equal(r.status, 200)
  assert.deepEqual(r.json, [{ entryPoints: ['db'], service: 'db', rule: 'HostSNI(`*`)', status: 'enabled', using: ['db'], name: 'db@file', provider: 'file', priorityStr: '0' }])
  assert.equal((await json(`${a.dash}/api/tcp/routers/db@file`)).status, 200)
  r = await json(`${a.dash}/api/tcp/services`)
  assert.equal(r.status, 200)
  assert.deepEqual(r.json, [{
    loadBalancer: { servers: [{ address: b2!.address, weight: 1 }] },
    status: 'enabled',
    usedBy: ['db@file'],
    name: 'db@file',
    provider: 'file',
    type: 'loadbalancer',
    serverStatus: { [b2!.address]: 'UP' },
  }])
  for (const path of ['/api/tcp/middlewares', '/api/udp/routers', '/api/udp/services']) {
    r = await json(`${a.dash}${path}`)
    assert.equal(r.status, 200, path)
    assert.deepEqual(r.json, [], path)
  }
  assert.equal((await json(`${a.dash}/api/udp/routers/x@file`)).status, 404)
  const overview = (await json(`${a.dash}/api/overview`)).json as { tcp: { routers: { total: number }, services: { total: number } } }
  assert.equal(overview.tcp.routers.total, 1)
  assert.equal(overview.tcp.services.total, 1)
  const raw = (await json(`${a.dash}/api/rawdata`)).json as Record<string, unknown>
  assert.deepEqual(Object.keys(raw.tcpRouters as object), ['db@file'])

  // durations in Go's form everywhere
  const all = JSON.stringify([(await json(`${a.dash}/api/http/services`)).json, (await json(`${a.dash}/api/entrypoints`)).json, (await json(`${a.dash}/api/http/middlewares`)).json])
  assert.doesNotMatch(all, /"\d+ms"/, 'no "1000ms"-style durations')
  assert.doesNotMatch(all, /Ms"/, 'no lb-internal millisecond keys')
  const db = (await json(`${a.dash}/api/http/services/db@file`)).json as { loadBalancer: { healthCheck: { interval: string, timeout: string } } }
  assert.deepEqual([db.loadBalancer.healthCheck.interval, db.loadBalancer.healthCheck.timeout], ['1m30s', '1.5s'])
  const ep = ((await json(`${a.dash}/api/entrypoints/web`)).json) as { transport: { lifeCycle: { graceTimeOut: string }, respondingTimeouts: { readTimeout: string } } }
  assert.equal(ep.transport.lifeCycle.graceTimeOut, '10s')
  assert.equal(ep.transport.respondingTimeouts.readTimeout, '50s')

  // middleware options under Traefik's names
  const mw = async (id: string): Promise<Record<string, unknown>> => (await json(`${a.dash}/api/http/middlewares/${id}`)).json as Record<string, unknown>
  assert.deepEqual((await mw('limit@file')).rateLimit, { average: 50, period: '1s', burst: 100 })
  assert.deepEqual((await mw('slow@file')).rateLimit, { algorithm: 'slidingWindow', limit: 100, period: '10s' })
  const gz = (await mw('gzip@file')).compress as Record<string, unknown>
  assert.equal(gz.minResponseBodyBytes, 1024)
})
