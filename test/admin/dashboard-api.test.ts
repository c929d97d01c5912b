// Dashboard API (Traefik v3 shapes) through real sockets: golden bodies,
// sorting and paging with X-Next-Page, Traefik's error bodies, per-server
// UP/DOWN, and no listener at all when the flags are off.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { freePort, request, startLb, waitFor } from '../helpers.js'
import { backends, golden, json, normalize, send, startAdminLb } from './util.js'

test('dashboard API: routers, services, middlewares, entry points, overview, rawdata, version', async (t) => {
  const [b1, b2] = await backends(2)
  const config = `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"

[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"

[routers.api]
rule = "PathPrefix(\`/api/\`)"
service = "api"

[routers.status]
rule = "Path(\`/status\`)"
service = "status"
priority = 100

[services.status]
kind = "status"

[services.web]
[[services.web.servers]]
name = "w1"
address = "${b1!.address}"
check = false

[services.api]
balance = "leastconn"
[[services.api.servers]]
name = "a1"
address = "${b2!.address}"
weight = 2
[[services.api.servers]]
name = "down"
address = "127.0.0.1:1"
[services.api.health_check]
interval = "100ms"
fall = 1
`
  const a = await startAdminLb(config)
  t.after(async () => { await a.lb.stop(); await b1!.close(); await b2!.close() })
  // let the failing server's checks take it DOWN
  await waitFor(async () => {
    const s = (await json(`${a.dash}/api/http/services/api@file`)).json as { serverStatus: Record<string, string> }
    return s.serverStatus['http://127.0.0.1:1'] === 'DOWN'
  }, 'server "down" of api@file DOWN in the dashboard API', 5000, 50)
  const ports = { B1PORT: b1!.port, B2PORT: b2!.port, ENTRYPORT: a.lb.port }
  const g = (name: string, v: unknown): void => golden(name, normalize(JSON.stringify(v, null, 2) + '\n', ports))

  let r = await json(`${a.dash}/api/http/routers`)
  assert.equal(r.status, 200)
  assert.equal(r.headers['x-next-page'], '1')
  assert.deepEqual((r.json as Array<{ name: string }>).map((x) => x.name), ['api@file', 'status@file', 'web@file'])
  g('dashboard-routers.json', r.json)
  g('dashboard-router-web.json', (await json(`${a.dash}/api/http/routers/web@file`)).json)
  g('dashboard-services.json', (await json(`${a.dash}/api/http/services`)).json)
  g('dashboard-middlewares.json', (await json(`${a.dash}/api/http/middlewares`)).json)
  g('dashboard-entrypoints.json', (await json(`${a.dash}/api/entrypoints`)).json)
  g('dashboard-overview.json', (await json(`${a.dash}/api/overview`)).json)
  g('dashboard-rawdata.json', (await json(`${a.dash}/api/rawdata`)).json)
  const v = (await json(`${a.dash}/api/version`)).json as { Version: string, Codename: string, startDate: string }
  assert.equal(typeof v.Version, 'string')
  assert.ok(!Number.isNaN(Date.parse(v.startDate)))

  // paging
  r = await json(`${a.dash}/api/http/routers?per_page=2`)
  assert.deepEqual((r.json as Array<{ name: string }>).map((x) => x.name), ['api@file', 'status@file'])
  assert.equal(r.headers['x-next-page'], '2')
  r = await json(`${a.dash}/api/http/routers?per_page=2&page=2`)
  assert.deepEqual((r.json as Array<{ name: string }>).map((x) => x.name), ['web@file'])
  assert.equal(r.headers['x-next-page'], '1')
  r = await json(`${a.dash}/api/http/routers?per_page=2&page=3`)
  assert.equal(r.status, 400)
  assert.equal(r.body, '{"message":"invalid request: page: 3, per_page: 2"}\n')
  r = await json(`${a.dash}/api/http/routers?sortBy=priority&direction=desc`)
  assert.equal((r.json as Array<{ name: string }>)[0]!.name, 'status@file')
  // a sort key named after an Object.prototype member is an unknown key: sorted by name, as Traefik
  for (const key of ['__proto__', 'constructor', 'toString']) {
    r = await json(`${a.dash}/api/http/routers?sortBy=${key}`)
    assert.equal(r.status, 200, `${key}: ${r.body}`)
    assert.deepEqual((r.json as Array<{ name: string }>).map((x) => x.name), ((await json(`${a.dash}/api/http/routers`)).json as Array<{ name: string }>).map((x) => x.name))
  }
  r = await json(`${a.dash}/api/http/routers?serviceName=api@file`)
  assert.deepEqual((r.json as Array<{ name: string }>).map((x) => x.name), ['api@file'])
  r = await json(`${a.dash}/api/http/routers/nope@file`)
  assert.equal(r.status, 404)
  assert.equal(r.headers['content-type'], 'text/plain; charset=utf-8')
  assert.equal(r.body, '{"message":"router not found: nope@file"}\n')

  // a backend created through the config API shows with provider "api"
  const c = await send('POST', `${a.admin}/v2/services/lb/configuration/backends`, { name: 'extra', balance: { algorithm: 'source' } })
  assert.equal(c.status, 201)
  r = await json(`${a.dash}/api/http/services/extra@api`)
  assert.equal(r.status, 200)
  assert.equal((r.json as { provider: string }).provider, 'api')
  assert.deepEqual(((await json(`${a.dash}/api/overview`)).json as { providers: string[] }).providers, ['File', 'API'])
})

test('dashboard API: no listener when disabled', async (t) => {
  // a port of our choosing, not 0: the test shows that nothing listens on the address the config gives
  const port = await freePort()
  const lb = await startLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[dashboard]
address = "127.0.0.1:${port}"
api = false
metrics = false
`)
  t.after(() => lb.stop())
  await assert.rejects(request(`http://127.0.0.1:${port}/api/http/routers`), /ECONNREFUSED/)
})
