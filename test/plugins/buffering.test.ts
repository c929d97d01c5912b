// buffering (Traefik's) through the real balancer: a chunked upload reaches
// the service with a Content-Length (streamed chunked without the
// middleware); a body over max_request_body_bytes gets 413 and never reaches
// it; a chunked answer reaches the client with its Content-Length, one over
// max_response_body_bytes becomes a 500, one the server cuts midway a 502;
// HTTP/2 clients alike; disable_*_buffer streams; retry_expression is
// refused at load; the dashboard API shows the options as Traefik's does.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, request, startBackend } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { h2request, lbCheck, oneMiddleware, problems } from './setup.js'

describe('buffering: config validation', () => {
  test('retry_expression is refused with the reason; sizes are bytes', () => {
    assert.match(problems(oneMiddleware('type = "buffering"\nretry_expression = "IsNetworkError() && Attempts() < 2"')),
      /middlewares\.m\.retry_expression: not supported by lb .*retry middleware/)
    assert.match(problems(oneMiddleware('type = "buffering"\nmax_request_body_bytes = -1')), /middlewares\.m\.max_request_body_bytes: expected an integer/)
    assert.match(problems(oneMiddleware('type = "buffering"\nmax_body = 1')), /middlewares\.m\.max_body/)
  })
})

const CHUNKED = { 'transfer-encoding': 'chunked' }

describe('buffering through the balancer', () => {
  let app: Backend, a: AdminLb
  let h2c = 0
  let node = 0
  before(async () => {
    app = await startBackend('app', (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x')
      const n = Number(url.searchParams.get('n') ?? 0)
      const what = url.pathname.split('/').pop()
      let got = 0
      req.on('data', (d: Buffer) => { got += d.length })
      req.on('end', () => {
        if (what === 'echo') {
          res.setHeader('content-type', 'application/json')
          res.end(JSON.stringify({ te: req.headers['transfer-encoding'] ?? null, cl: req.headers['content-length'] ?? null, got }))
        } else if (what === 'chunks') {
          res.writeHead(200, { 'content-type': 'text/plain' }) // no length: Node sends it chunked
          for (let i = 0; i < n; i += 100) res.write('x'.repeat(Math.min(100, n - i)))
          res.end()
        } else if (what === 'fixed') {
          res.end('y'.repeat(n))
        } else if (what === 'cut') {
          res.writeHead(200, { 'content-length': '1000' })
          res.write('z'.repeat(10), () => res.destroy())
        }
      })
    })
    a = await startAdminLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.h2c]
address = "127.0.0.1:0"
protocol = "h2c"
[entrypoints.node]
address = "127.0.0.1:0"
engine = "node"
[middlewares.buf]
type = "buffering"
max_request_body_bytes = 1000
max_response_body_bytes = 2000
[middlewares.stream]
type = "buffering"
max_request_body_bytes = 1000
disable_request_buffer = true
disable_response_buffer = true
[routers.buf]
rule = "PathPrefix(\`/buf\`)"
service = "app"
middlewares = ["buf"]
[routers.stream]
rule = "PathPrefix(\`/stream\`)"
service = "app"
middlewares = ["stream"]
[routers.plain]
rule = "PathPrefix(\`/\`)"
service = "app"
[services.app]
retries = 0
[[services.app.servers]]
address = "${app.address}"
check = false
max_fails = 0
`)
    h2c = await a.lb.portOf('h2c')
    node = await a.lb.portOf('node')
  })
  after(async () => { await a.lb.stop(); await app.close() })

  test('on the node engine (node:http) the same: the upload with its length, the answer whole, 413 and 500', async () => {
    const url = `http://127.0.0.1:${node}`
    const r = await request(`${url}/buf/echo`, { method: 'POST', headers: CHUNKED, body: 'a'.repeat(700) })
    assert.deepEqual(JSON.parse(r.body), { te: null, cl: '700', got: 700 })
    const ok = await request(`${url}/buf/chunks?n=1500`)
    assert.equal(ok.headers['content-length'], '1500')
    assert.equal((await request(`${url}/buf/echo`, { method: 'POST', headers: CHUNKED, body: 'b'.repeat(1500) })).status, 413)
    assert.equal((await request(`${url}/buf/chunks?n=2001`)).status, 500)
  })

  test('a chunked upload reaches the service with a Content-Length, whole; without the middleware it streams chunked', async () => {
    const body = 'a'.repeat(900)
    const r = await request(`${a.lb.url}/buf/echo`, { method: 'POST', headers: CHUNKED, body })
    assert.equal(r.status, 200)
    assert.deepEqual(JSON.parse(r.body), { te: null, cl: '900', got: 900 })
    const plain = await request(`${a.lb.url}/plain/echo`, { method: 'POST', headers: CHUNKED, body })
    assert.deepEqual(JSON.parse(plain.body), { te: 'chunked', cl: null, got: 900 })
    const stream = await request(`${a.lb.url}/stream/echo`, { method: 'POST', headers: CHUNKED, body })
    assert.deepEqual(JSON.parse(stream.body), { te: 'chunked', cl: null, got: 900 }, 'disable_request_buffer streams')
  })

  test('a body over max_request_body_bytes: 413, and the service never sees it', async () => {
    const seen = app.requests.length
    const declared = await request(`${a.lb.url}/buf/echo`, { method: 'POST', body: 'b'.repeat(1001) })
    assert.equal(declared.status, 413)
    assert.equal(declared.body, 'request body larger than 1000 bytes\n')
    const chunked = await request(`${a.lb.url}/buf/echo`, { method: 'POST', headers: CHUNKED, body: 'b'.repeat(1500) })
    assert.equal(chunked.status, 413)
    const streamed = await request(`${a.lb.url}/stream/echo`, { method: 'POST', body: 'b'.repeat(1001) })
    assert.equal(streamed.status, 413, 'a declared length is held to the bound when the body streams')
    assert.equal(app.requests.length, seen)
  })

  test('a chunked answer reaches the client with its Content-Length; over max_response_body_bytes a 500', async () => {
    const ok = await request(`${a.lb.url}/buf/chunks?n=1500`)
    assert.equal(ok.status, 200)
    assert.equal(ok.headers['content-length'], '1500')
    assert.equal(ok.headers['transfer-encoding'], undefined)
    assert.equal(ok.body, 'x'.repeat(1500))
    const plain = await request(`${a.lb.url}/plain/chunks?n=1500`)
    assert.equal(plain.headers['transfer-encoding'], 'chunked')
    const stream = await request(`${a.lb.url}/stream/chunks?n=3000`)
    assert.equal(stream.headers['transfer-encoding'], 'chunked', 'disable_response_buffer streams, unbounded')
    for (const path of ['/buf/chunks?n=2001', '/buf/fixed?n=3000']) {
      const big = await request(`${a.lb.url}${path}`)
      assert.equal(big.status, 500, path)
      assert.equal(big.body, 'response body larger than 2000 bytes (buffering middleware buf)\n')
    }
  })

  test('an answer the server cuts midway: 502, not a cut answer', async () => {
    const r = await request(`${a.lb.url}/buf/cut`)
    assert.equal(r.status, 502)
  })

  test('over HTTP/2 the same: the upload arrives with its length, the answer whole', async () => {
    const r = await h2request(`http://127.0.0.1:${h2c}`, '/buf/echo', ['a'.repeat(300), 'b'.repeat(300)])
    assert.equal(r.status, 200)
    assert.deepEqual(JSON.parse(r.body), { te: null, cl: '600', got: 600 })
    const big = await h2request(`http://127.0.0.1:${h2c}`, '/buf/chunks?n=2500', [])
    assert.equal(big.status, 500)
  })

  test('the dashboard API shows it as Traefik\'s', async () => {
    const mw = JSON.parse((await request(`${a.dash}/api/http/middlewares/buf@file`)).body) as Record<string, unknown>
    assert.deepEqual(mw.buffering, { maxRequestBodyBytes: 1000, maxResponseBodyBytes: 2000 })
    assert.equal(mw.type, 'buffering')
    const s = JSON.parse((await request(`${a.dash}/api/http/middlewares/stream@file`)).body) as Record<string, unknown>
    assert.deepEqual(s.buffering, { maxRequestBodyBytes: 1000, disableRequestBuffer: true, disableResponseBuffer: true })
  })
})

describe('buffering: Traefik\'s documented example ("Sets the maximum request body to 2MB")', () => {
  // [http.middlewares.limit.buffering] maxRequestBodyBytes = 2000000, in lb's TOML
  const text = (backend: string): string => `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[middlewares.limit]
type = "buffering"
max_request_body_bytes = 2000000
[routers.r]
rule = "PathPrefix(\`/\`)"
service = "app"
middlewares = ["limit"]
[services.app]
[[services.app.servers]]
address = "${backend}"
check = false
`
  let app: Backend, a: AdminLb
  before(async () => {
    app = await startBackend('app', (req, res) => {
      let n = 0
      req.on('data', (d: Buffer) => { n += d.length })
      req.on('end', () => res.end(`got ${n} (${req.headers['content-length'] ?? 'no length'})`))
    })
    a = await startAdminLb(text(app.address))
  })
  after(async () => { await a.lb.stop(); await app.close() })

  test('lb check accepts it; 2 MB pass (with their length), one byte more is not forwarded: 413', async () => {
    const r = lbCheck(text('127.0.0.1:9'))
    assert.equal(r.status, 0, r.out)
    const ok = await request(a.lb.url + '/', { method: 'POST', headers: CHUNKED, body: Buffer.alloc(2_000_000, 1) })
    assert.equal(ok.body, 'got 2000000 (2000000)')
    const over = await request(a.lb.url + '/', { method: 'POST', headers: CHUNKED, body: Buffer.alloc(2_000_001, 1) })
    assert.equal(over.status, 413)
  })
})
