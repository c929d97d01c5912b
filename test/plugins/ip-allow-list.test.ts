// ipAllowList through the real balancer with IPv4 and IPv6 clients; the status
// service's `allow` uses the same matcher and is validated the same way.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, request, startBackend, startLb } from '../helpers.js'
import { oneMiddleware, problems } from './setup.js'

describe('ipAllowList config validation', () => {
  test('each bad address is named; the list is required; status allow lists are checked too', () => {
    assert.match(problems(oneMiddleware('type = "ipAllowList"\nsource_range = ["10.0.0.0/8", "10.0.0.300", "fe80::/129"]')),
      /middlewares\.m\.source_range\[1\]: expected an IPv4 or IPv6 address or CIDR .*found "10\.0\.0\.300"[\s\S]*middlewares\.m\.source_range\[2\]: .*found "fe80::\/129"/)
    assert.match(problems(oneMiddleware('type = "ipAllowList"')), /middlewares\.m\.source_range: expected a non-empty list of addresses or CIDRs \(required\), found nothing/)
    assert.match(problems('[entrypoints.web]\naddress = "127.0.0.1:8080"\n[services.status]\nkind = "status"\nallow = ["localhost"]\n'),
      /services\.status\.allow\[0\]: expected an IPv4 or IPv6 address or CIDR/)
  })
})

describe('ipAllowList through the balancer', () => {
  let backend: Backend, lb: Lb, v6: number
  before(async () => {
    backend = await startBackend('web')
    lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.v6]
address = "[::1]:0"

[routers.v4]
rule = "PathPrefix(\`/v4\`)"
service = "web"
middlewares = ["v4-only"]
[routers.mixed]
rule = "PathPrefix(\`/mixed\`)"
service = "web"
middlewares = ["mixed"]
[routers.status]
rule = "Path(\`/status\`)"
service = "status"
middlewares = ["mixed"]

[services.web]
[[services.web.servers]]
address = "${backend.address}"
check = false
[services.status]
kind = "status"
allow = ["127.0.0.0/8", "::1"]

[middlewares.v4-only]
type = "ipAllowList"
source_range = ["127.0.0.2/31"]

[middlewares.mixed]
type = "ipAllowList"
source_range = ["127.0.0.5", "::1/128"]
`)
    v6 = await lb.portOf('v6')
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('IPv4 CIDRs: inside passes, outside gets 403', async () => {
    assert.equal((await request(`${lb.url}/v4`, { localAddress: '127.0.0.2' })).status, 200)
    assert.equal((await request(`${lb.url}/v4`, { localAddress: '127.0.0.3' })).status, 200)
    const r = await request(`${lb.url}/v4`, { localAddress: '127.0.0.4' })
    assert.equal(r.status, 403)
    assert.equal(r.body, 'forbidden\n')
    assert.equal((await request(`http://[::1]:${v6}/v4`)).status, 403)
  })

  test('IPv6 and IPv4 in one list', async () => {
    assert.equal((await request(`http://[::1]:${v6}/mixed`)).status, 200)
    assert.equal((await request(`${lb.url}/mixed`, { localAddress: '127.0.0.5' })).status, 200)
    assert.equal((await request(`${lb.url}/mixed`, { localAddress: '127.0.0.6' })).status, 403)
  })

  test('the status page: the middleware and the service\'s own allow list, one matcher', async () => {
    assert.equal((await request(`${lb.url}/status`, { localAddress: '127.0.0.5' })).status, 200)
    assert.equal((await request(`http://[::1]:${v6}/status`)).status, 200)
    assert.equal((await request(`${lb.url}/status`, { localAddress: '127.0.0.6' })).status, 403)
  })
})
