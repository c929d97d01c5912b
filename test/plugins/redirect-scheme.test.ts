// redirectScheme through the real balancer: HTTP → HTTPS keeping host, path
// and query; 301/308 when permanent, 302/307 otherwise.
import { strict as assert } from 'node:assert'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, request, startBackend, startLb } from '../helpers.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'

describe('redirectScheme config validation', () => {
  test('scheme, port, permanent', () => {
    assert.match(problems(oneMiddleware('type = "redirectScheme"\nscheme = "ftp"')), /middlewares\.m\.scheme: expected one of "https", "http", found "ftp"/)
    assert.match(problems(oneMiddleware('type = "redirectScheme"\nport = 70000')), /middlewares\.m\.port: expected an integer from 0 to 65535, found number 70000/)
    assert.match(problems(oneMiddleware('type = "redirectScheme"\npermanent = 1')), /middlewares\.m\.permanent: expected true or false, found number 1/)
  })
})

describe('redirectScheme through the balancer', () => {
  let backend: Backend, lb: Lb
  before(async () => {
    backend = await startBackend('web')
    lb = await startLb(mwConfig(backend.address, `
[middlewares.permanent]
type = "redirectScheme"
permanent = true

[middlewares.temporary]
type = "redirectScheme"
port = 8443
`, { '/tmp': ['temporary'], '/': ['permanent'] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('permanent: 301 for GET and HEAD, 308 for other methods; host, path and query kept', async () => {
    for (const [method, status] of [['GET', 301], ['HEAD', 301], ['POST', 308], ['DELETE', 308]] as const) {
      const r = await request(`${lb.url}/a/b%20c?x=1&y=2`, { method, headers: { host: 'Example.COM:8080' } })
      assert.equal(r.status, status, method)
      assert.equal(r.headers.location, 'https://example.com/a/b%20c?x=1&y=2')
    }
    assert.equal(backend.requests.length, 0)
  })

  test('not permanent: 302 / 307, with a port when one is configured; IPv6 literal hosts stay bracketed', async () => {
    const get = await request(`${lb.url}/tmp/p`, { headers: { host: 'shop.example' } })
    assert.equal(get.status, 302)
    assert.equal(get.headers.location, 'https://shop.example:8443/tmp/p')
    const put = await request(`${lb.url}/tmp/p?q`, { method: 'PUT', headers: { host: '[2001:db8::1]:80' }, body: 'x' })
    assert.equal(put.status, 307)
    assert.equal(put.headers.location, 'https://[2001:db8::1]:8443/tmp/p?q')
  })

  test('a request with an empty Host is not redirected: 400 before routing (uWS itself drops one with no Host at all)', async () => {
    const reply = await new Promise<string>((resolve, reject) => {
      const s = net.connect(lb.port, '127.0.0.1', () => s.write('GET /x HTTP/1.1\r\nhost:\r\n\r\n'))
      let data = ''
      s.on('data', (d) => {
        data += d.toString()
        if (/\r\n\r\n[^]*\n$/.test(data)) s.destroy() // head and the one-line body
      })
      s.on('close', () => resolve(data))
      s.on('error', reject)
    })
    assert.match(reply, /^HTTP\/1\.1 400/)
    assert.match(reply, /bad request: invalid Host header: empty/)
  })

  test('a Host or path with a bare CR or LF never reaches the Location header (no response header injection)', async () => {
    // core/worker/transport/uws/client.ts writes a response head as one block and relies on this
    for (const raw of ['GET /x HTTP/1.1\r\nhost: a\rX-Injected: 1\r\n\r\n', 'GET /x HTTP/1.1\r\nhost: a\nX-Injected: 1\r\n\r\n',
      'GET /x\rX-Injected:1 HTTP/1.1\r\nhost: a\r\n\r\n']) {
      const reply = await new Promise<string>((resolve) => {
        const s = net.connect(lb.port, '127.0.0.1', () => s.write(raw))
        let data = ''
        s.on('data', (d) => { data += d.toString() })
        s.on('error', () => {})
        s.on('close', () => resolve(data))
        setTimeout(() => s.destroy(), 500)
      })
      assert.doesNotMatch(reply, /x-injected/i, JSON.stringify(raw))
      assert.doesNotMatch(reply, /^HTTP\/1\.1 30/, JSON.stringify(raw))
    }
  })
})
