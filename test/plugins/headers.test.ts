// headers through the real balancer: the seed's security headers and custom
// request/response headers (set replaces, "" removes).
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, request, startBackend, startLb } from '../helpers.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'

describe('headers config validation', () => {
  test('names, reserved headers, values, STS flags', () => {
    assert.match(problems(oneMiddleware('type = "headers"\n[middlewares.m.request_headers]\n"Bad Name" = "x"')),
      /middlewares\.m\.request_headers\."Bad Name": expected a header name/)
    assert.match(problems(oneMiddleware('type = "headers"\n[middlewares.m.request_headers]\nHost = "x"')),
      /middlewares\.m\.request_headers\.Host: Host is managed by the proxy and cannot be set here/)
    assert.match(problems(oneMiddleware('type = "headers"\n[middlewares.m.response_headers]\nX-A = 1')),
      /middlewares\.m\.response_headers\.X-A: expected a string \(empty removes the header\), found number 1/)
    assert.match(problems(oneMiddleware('type = "headers"\n[middlewares.m.response_headers]\nX-A = "a\\r\\nSet-Cookie: x"')),
      /middlewares\.m\.response_headers\.X-A: expected a value without CR, LF or NUL/)
    assert.match(problems(oneMiddleware('type = "headers"\nsts_preload = true')), /sts_include_subdomains and sts_preload need sts_seconds > 0/)
    assert.match(problems(oneMiddleware('type = "headers"\nframe_deny = "yes"')), /middlewares\.m\.frame_deny: expected true or false, found "yes"/)
  })
})

describe('headers through the balancer', () => {
  let backend: Backend, lb: Lb
  before(async () => {
    backend = await startBackend('web', (req, res) => {
      req.resume()
      req.on('end', () => {
        res.setHeader('Server', 'backend/1.0')
        res.setHeader('X-Frame-Options', 'SAMEORIGIN')
        res.setHeader('content-type', 'application/json')
        res.end(JSON.stringify(req.headers))
      })
    })
    lb = await startLb(mwConfig(backend.address, `
[middlewares.secure]
type = "headers"
frame_deny = true
content_type_nosniff = true
browser_xss_filter = true
sts_seconds = 31536000
sts_include_subdomains = true

[middlewares.custom]
type = "headers"
[middlewares.custom.request_headers]
X-Env = "prod"
X-Debug = ""
[middlewares.custom.response_headers]
Server = ""
X-Served-By = "lb"
`, { '/custom': ['secure', 'custom'], '/': ['secure'] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('the seed\'s security headers, replacing the upstream\'s own', async () => {
    const r = await request(`${lb.url}/x`)
    assert.equal(r.headers['x-frame-options'], 'DENY')
    assert.equal(r.headers['x-content-type-options'], 'nosniff')
    assert.equal(r.headers['x-xss-protection'], '1; mode=block')
    assert.equal(r.headers['strict-transport-security'], 'max-age=31536000; includeSubDomains')
    assert.equal(r.headers.server, 'backend/1.0')
  })

  test('custom request headers replace or remove the client\'s; custom response headers set or remove', async () => {
    const r = await request(`${lb.url}/custom`, { headers: { 'x-env': 'dev', 'x-debug': '1', 'x-other': 'kept' } })
    const seen = JSON.parse(r.body)
    assert.equal(seen['x-env'], 'prod')
    assert.equal(seen['x-debug'], undefined)
    assert.equal(seen['x-other'], 'kept')
    assert.equal(r.headers.server, undefined)
    assert.equal(r.headers['x-served-by'], 'lb')
    assert.equal(r.headers['x-frame-options'], 'DENY')
  })
})
