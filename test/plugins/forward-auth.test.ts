// forwardAuth (Traefik's): through the real balancer, in front of a real
// authentication server this test starts (node:http, behaving as Authelia's
// forward-auth endpoint does: a session cookie lets through with Remote-User,
// none gets a 302 to the login page, a bad token a 401 with a body). Checks what
// the server is told (X-Forwarded-*, a client's spoofed ones dropped, the
// headers it asked for), what the backend gets (Remote-User from the server,
// never the client's), what the client gets on refusal, and the failures:
// server down, an answer too large. The dashboard API shows it as Traefik's.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type Backend, request, startBackend } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'

describe('forwardAuth: config validation', () => {
  test('address is an http(s) URL; header names are tokens; unknown keys are named', () => {
    assert.match(problems(oneMiddleware('type = "forwardAuth"')), /middlewares\.m\.address: expected a string/)
    assert.match(problems(oneMiddleware('type = "forwardAuth"\naddress = "ftp://auth"')), /middlewares\.m\.address: expected an http:\/\/ or https:\/\/ URL/)
    assert.match(problems(oneMiddleware('type = "forwardAuth"\naddress = "http://a/"\nauth_response_headers = ["Remote User"]')), /middlewares\.m\.auth_response_headers\[0\]: expected a header name/)
    assert.match(problems(oneMiddleware('type = "forwardAuth"\naddress = "http://a/"\nauthResponseHeaders = ["X"]')), /middlewares\.m\.authResponseHeaders: unknown key/)
  })
})

interface Asked { method: string, url: string, headers: http.IncomingHttpHeaders }

describe('forwardAuth through the balancer', () => {
  let backend: Backend; let a: AdminLb; let auth: http.Server; let authPort = 0
  const asked: Asked[] = []
  const get = (path: string, headers: Record<string, string> = {}, method = 'GET', body?: string): ReturnType<typeof request> =>
    request(a.lb.url, { path, headers, method, body })
  const lastAsked = (): Asked => asked[asked.length - 1]!
  const lastSeen = (): Backend['requests'][number] => backend.requests[backend.requests.length - 1]!

  before(async () => {
    auth = http.createServer((req, res) => {
      asked.push({ method: req.method!, url: req.url!, headers: req.headers })
      req.resume()
      const cookie = req.headers.cookie ?? ''
      if (req.headers.authorization === 'Bearer bad') {
        res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer error="invalid_token"' }).end('token refused\n')
      } else if (req.headers.authorization === 'Bearer huge') {
        res.writeHead(403, { 'content-type': 'text/plain' }).end('x'.repeat(70_000))
      } else if (cookie.includes('session=ok')) {
        res.setHeader('set-cookie', ['refreshed=1; Path=/', 'other=2; Path=/'])
        res.writeHead(200, { 'remote-user': 'ann', 'remote-groups': 'admins', 'x-secret': 'not for the backend' }).end()
      } else {
        const back = `${String(req.headers['x-forwarded-proto'])}://${String(req.headers['x-forwarded-host'])}${String(req.headers['x-forwarded-uri'])}`
        res.writeHead(302, { location: `https://login.example/?rd=${encodeURIComponent(back)}`, 'set-cookie': 'login=1; Path=/' }).end()
      }
    })
    await new Promise<void>((resolve) => auth.listen(0, '127.0.0.1', resolve))
    authPort = (auth.address() as AddressInfo).port
    backend = await startBackend('web')
    a = await startAdminLb('[global]\nworkers = 2\naccess_log = "off"\n\n' + mwConfig(backend.address, `
[middlewares.auth]
type = "forwardAuth"
address = "http://127.0.0.1:${authPort}/api/authz/forward-auth?x=1"
auth_response_headers = ["Remote-User", "Remote-Groups"]
add_auth_cookies_to_response = ["refreshed"]
max_response_body_size = "64k"

[middlewares.trusting]
type = "forwardAuth"
address = "http://127.0.0.1:${authPort}/trusting"
trust_forward_header = true
auth_request_headers = ["Cookie", "X-Forwarded-Uri"]

[middlewares.strip]
type = "stripPrefix"
prefixes = ["/app"]

[middlewares.down]
type = "forwardAuth"
address = "http://127.0.0.1:1/"
`, { '/app': ['strip', 'auth'], '/trusting': ['trusting'], '/down': ['down'], '/': ['auth'] }))
  })
  after(async () => {
    await a.lb.stop()
    await backend.close()
    auth.closeAllConnections()
    await new Promise((resolve) => auth.close(resolve))
  })

  test('a session the server accepts passes, with the headers it named (not the client\'s own) and its chosen cookie', async () => {
    const before = backend.requests.length
    const r = await get('/doc?q=1', { cookie: 'session=ok', 'remote-user': 'mallory', 'x-forwarded-uri': '/spoofed' })
    assert.equal(r.status, 200)
    assert.equal(r.body, 'web\n')
    assert.equal(backend.requests.length, before + 1)
    const seen = lastSeen()
    assert.equal(seen.url, '/doc?q=1')
    assert.equal(seen.headers['remote-user'], 'ann', 'the server\'s Remote-User replaces the client\'s')
    assert.equal(seen.headers['remote-groups'], 'admins')
    assert.equal(seen.headers['x-secret'], undefined, 'only auth_response_headers are copied')
    assert.deepEqual(r.headers['set-cookie'], ['refreshed=1; Path=/'], 'only the cookies add_auth_cookies_to_response names')
    const q = lastAsked()
    assert.equal(q.method, 'GET')
    assert.equal(q.url, '/api/authz/forward-auth?x=1')
    assert.equal(q.headers['x-forwarded-method'], 'GET')
    assert.equal(q.headers['x-forwarded-proto'], 'http')
    assert.equal(q.headers['x-forwarded-host'], `127.0.0.1:${a.lb.port}`)
    assert.equal(q.headers['x-forwarded-uri'], '/doc?q=1', 'the client\'s X-Forwarded-Uri is not trusted')
    assert.equal(q.headers['x-forwarded-for'], '127.0.0.1')
    assert.equal(q.headers.cookie, 'session=ok')
  })

  test('no session: the server\'s 302 to its login page reaches the client as given, the backend sees nothing', async () => {
    const before = backend.requests.length
    const r = await get('/private/page?a=b', {}, 'POST', 'payload')
    assert.equal(r.status, 302)
    assert.equal(r.headers.location, `https://login.example/?rd=${encodeURIComponent(`http://127.0.0.1:${a.lb.port}/private/page?a=b`)}`)
    assert.deepEqual(r.headers['set-cookie'], ['login=1; Path=/'])
    assert.equal(lastAsked().headers['x-forwarded-method'], 'POST')
    assert.equal(lastAsked().method, 'GET', 'the server is asked with a GET, without the body')
    assert.equal(backend.requests.length, before)
  })

  test('a refusal with a body: status, headers and body as the server gave them', async () => {
    const r = await get('/x', { authorization: 'Bearer bad' })
    assert.equal(r.status, 401)
    assert.equal(r.headers['www-authenticate'], 'Bearer error="invalid_token"')
    assert.equal(r.body, 'token refused\n')
  })

  test('an accepted POST carries its body to the backend', async () => {
    const r = await get('/upload', { cookie: 'session=ok', 'content-type': 'text/plain' }, 'POST', 'hello body')
    assert.equal(r.status, 200)
    assert.equal(lastSeen().method, 'POST')
    assert.equal(lastSeen().body, 'hello body'.length)
  })

  test('after stripPrefix the server is told the path the backend will get (one path for both)', async () => {
    const r = await get('/app/users', { cookie: 'session=ok' })
    assert.equal(r.status, 200)
    assert.equal(lastAsked().headers['x-forwarded-uri'], '/users')
    assert.equal(lastSeen().url, '/users')
  })

  test('trust_forward_header keeps the client\'s X-Forwarded-*; auth_request_headers limits what the server sees', async () => {
    await get('/trusting/x', { cookie: 'session=ok', 'x-forwarded-uri': '/from-front', 'x-forwarded-for': '203.0.113.9', 'user-agent': 'ua' })
    const q = lastAsked()
    assert.equal(q.url, '/trusting')
    assert.equal(q.headers['x-forwarded-uri'], '/from-front')
    assert.equal(q.headers['x-forwarded-for'], '203.0.113.9, 127.0.0.1')
    assert.equal(q.headers.cookie, 'session=ok')
    assert.equal(q.headers['user-agent'], undefined)
  })

  test('the server down: 500 LB_ERR_FORWARD_AUTH naming the address, nothing reaches the backend', async () => {
    const before = backend.requests.length
    const r = await get('/down/x', { cookie: 'session=ok' })
    assert.equal(r.status, 500)
    assert.match(r.body, /LB_ERR_FORWARD_AUTH|authentication server did not answer: http:\/\/127\.0\.0\.1:1\//)
    assert.equal(backend.requests.length, before)
  })

  test('a refusal whose body is over max_response_body_size: 500, not a truncated page', async () => {
    const r = await get('/x', { authorization: 'Bearer huge' })
    assert.equal(r.status, 500)
    assert.match(r.body, /over max_response_body_size \(65536 bytes\)/)
  })

  test('many requests at once on kept-alive connections to the server: every one decided', async () => {
    const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => get(`/m${i}`, i % 2 === 0 ? { cookie: 'session=ok' } : {})))
    assert.deepEqual([...new Set(rs.map((r) => r.status))].sort(), [200, 302])
    assert.equal(rs.filter((r) => r.status === 200).length, 25)
  })

  test('the dashboard API shows it as Traefik\'s (forwardAuth with its options)', async () => {
    const m = JSON.parse((await request(`${a.dash}/api/http/middlewares/auth@file`)).body) as Record<string, unknown>
    assert.equal(m.type, 'forwardauth')
    const fa = m.forwardAuth as Record<string, unknown>
    assert.equal(fa.address, `http://127.0.0.1:${authPort}/api/authz/forward-auth?x=1`)
    assert.deepEqual(fa.authResponseHeaders, ['remote-user', 'remote-groups'])
  })
})
