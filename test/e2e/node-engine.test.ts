// engine = "node" (core/worker/transport/node/engine.ts) on raw sockets: what uWS
// refuses (README "Request forms at the edge") served through the same
// request path: pipelining in order behind proxied answers, trailers
// forwarded, chunk extensions ignored, absolute-form routed by its host,
// OPTIONS *, HTTP/1.0 without Host, a 408 after timeouts.header, and
// Expect: 100-continue answered only once routing, limits and authentication
// said yes. Third-party clients (curl, ab, nginx) and https are in
// node-engine-clients.test.ts.
import { strict as assert } from 'node:assert'
import { rmSync } from 'node:fs'
import net from 'node:net'
import { test } from 'node:test'
import { type Backend, type Lb, startBackend, startLb, waitFor } from '../helpers.js'
import { closed, connect, nextMessage, startWsEcho } from '../ws/echo.js'
import { exchange, parseResponses, pipeline } from './raw-http.js'

/** user "u", password "p" ({SHA} of "p") */
const USERS = 'users = ["u:{SHA}UWuXg/ylF+7L0dBk2i0WUxCxl1k="]'

/** An entry point on the node engine before backends `a` (Host a.test, and every other host) and `b` (Host b.test). */
function config (a: { address: string }, b: { address: string }, extra = ''): string {
  return `[global]
workers = 2
access_log = "off"
${extra}
[timeouts]
header = "1s"
[limits]
max_body = "10"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
engine = "node"
[routers.b]
rule = "Host(\`b.test\`)"
priority = 100
service = "b"
[routers.priv]
rule = "PathPrefix(\`/priv\`)"
service = "a"
middlewares = ["auth"]
[middlewares.auth]
type = "basicAuth"
${USERS}
[routers.a]
rule = "PathPrefix(\`/\`)"
service = "a"
[[services.a.servers]]
address = "${a.address}"
check = false
[[services.b.servers]]
address = "${b.address}"
check = false
`
}

/** Backend answers "<name> <method> <url> host=<host> body=<body> trailers=<json>", after 300 ms for a path with "slow". */
async function echoBackend (name: string): Promise<Backend> {
  return startBackend(name, (req, res) => {
    let body = ''
    req.setEncoding('latin1')
    req.on('data', (d: string) => { body += d })
    req.on('end', () => {
      const text = `${name} ${req.method!} ${req.url!} host=${req.headers.host ?? ''} body=${body} trailers=${JSON.stringify(req.rawTrailers)}`
      setTimeout(() => res.end(text), req.url!.includes('slow') ? 300 : 0)
    })
  })
}

async function start (t: { after: (fn: () => Promise<void>) => void }): Promise<{ lb: Lb, a: Backend, b: Backend }> {
  const a = await echoBackend('a')
  const b = await echoBackend('b')
  t.after(async () => { await a.close(); await b.close() })
  const lb = await startLb(config(a, b))
  t.after(async () => { await lb.stop(); rmSync(lb.dir, { recursive: true, force: true }) })
  return { lb, a, b }
}

const GET = (path: string, host = 'a.test'): string => `GET ${path} HTTP/1.1\r\nhost: ${host}\r\n\r\n`

test('node engine: pipelined requests behind proxied answers are each forwarded once and answered in order', async (t) => {
  const { lb, a } = await start(t)
  // one write: the first is answered last by the backend, the second has a body, the last goes to another server
  const post = 'POST /p2 HTTP/1.1\r\nhost: a.test\r\ncontent-length: 3\r\n\r\nxyz'
  const r = await pipeline(lb.port, [GET('/slow1') + post + GET('/p3') + GET('/p4', 'b.test')], undefined, 3000)
  const bodies = parseResponses(r.text, [false, false, false, false]).map((x) => x.body)
  assert.deepEqual(bodies, [
    'a GET /slow1 host=a.test body= trailers=[]',
    'a POST /p2 host=a.test body=xyz trailers=[]',
    'a GET /p3 host=a.test body= trailers=[]',
    'b GET /p4 host=b.test body= trailers=[]',
  ])
  assert.equal(r.closed, false, 'the connection stays open')
  assert.deepEqual(a.requests.map((x) => x.url).sort(), ['/p2', '/p3', '/slow1'])
})

test('node engine: a chunked body with extensions and trailers reaches the server with its trailers (not framing ones)', async (t) => {
  const { lb } = await start(t)
  const req = 'POST /up HTTP/1.1\r\nhost: a.test\r\ntransfer-encoding: chunked\r\n\r\n' +
    '3;ext=1\r\nabc\r\n2;a=b;c="d e"\r\nde\r\n0\r\nX-Checksum: 42\r\nHost: evil.test\r\nAuthorization: Basic eDp5\r\n\r\n'
  const r = await exchange(lb.port, req)
  assert.equal(r.status, 200, r.text)
  assert.equal(r.responses[0]!.body, 'a POST /up host=a.test body=abcde trailers=["x-checksum","42"]', 'Host and Authorization are no trailers')
  // a Content-Length trailer (framing) is refused by llhttp: 400 and a close
  const cl = await exchange(lb.port, 'POST /up HTTP/1.1\r\nhost: a.test\r\ntransfer-encoding: chunked\r\n\r\n2\r\nde\r\n0\r\ncontent-length: 9\r\n\r\n', { waitClose: true })
  assert.equal(cl.status, 400, cl.text)
  assert.equal(cl.closed, true)
})

test('node engine: an absolute-form target is routed by its authority, which replaces Host; OPTIONS * is answered by lb', async (t) => {
  const { lb, b } = await start(t)
  const r = await exchange(lb.port, 'GET http://b.test:8080/x/../y?q=1 HTTP/1.1\r\nhost: a.test\r\n\r\n')
  assert.equal(r.responses[0]?.body, 'b GET /y?q=1 host=b.test:8080 body= trailers=[]')
  assert.equal(b.requests.length, 1)
  const bad = await exchange(lb.port, 'GET http://user@b.test/ HTTP/1.1\r\nhost: a.test\r\n\r\n')
  assert.equal(bad.status, 400, 'userinfo is no host')
  const star = await exchange(lb.port, 'OPTIONS * HTTP/1.1\r\nhost: a.test\r\n\r\n')
  assert.equal(star.status, 200)
  assert.match(star.responses[0]!.head, /\r\nallow: GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH\r\n/)
  assert.equal(b.requests.length, 1, 'OPTIONS * is not forwarded')
})

test('node engine: HTTP/1.0 without Host (HAProxy httpchk, old clients) is served and closed; with keep-alive it is kept', async (t) => {
  const { lb, a } = await start(t)
  const r = await exchange(lb.port, 'OPTIONS / HTTP/1.0\r\n\r\n', { waitClose: true })
  assert.equal(r.status, 200, r.text)
  assert.equal(r.closed, true)
  assert.equal(r.responses[0]!.body, `a OPTIONS / host=${a.address} body= trailers=[]`, 'the server gets its own address as Host')
  const k = await exchange(lb.port, ['GET /k1 HTTP/1.0\r\nconnection: keep-alive\r\n\r\n', 'GET /k2 HTTP/1.0\r\nconnection: keep-alive\r\n\r\n'])
  assert.deepEqual(k.responses.map((x) => x.status), [200, 200])
  assert.equal(k.closed, false)
  assert.match(k.responses[0]!.head, /\r\nConnection: keep-alive\r\n/i)
})

test('node engine: a request head not complete within timeouts.header gets 408 and a close', async (t) => {
  const { lb, a } = await start(t)
  const t0 = Date.now()
  const r = await exchange(lb.port, 'GET /drip HTTP/1.1\r\nhost: a.test\r\nx-slow: 1', { waitClose: true, ms: 10_000 })
  assert.equal(r.status, 408, r.text)
  assert.match(r.responses[0]!.body, /no complete request head within timeouts\.header = 1s/)
  assert.equal(r.closed, true)
  assert.ok(Date.now() - t0 >= 900, 'not before timeouts.header')
  assert.equal(a.requests.length, 0)
})

/** Writes `head`, then `body` once "100 Continue" came (if it comes); resolves with all that was read when a final answer is complete or the connection closed. */
function expectContinue (port: number, head: string, body: string): Promise<{ text: string, sawContinue: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(head))
    let text = ''
    let sent = false
    const done = (): void => { s.destroy(); resolve({ text, sawContinue: text.includes('100 Continue') }) }
    const timer = setTimeout(done, 5000)
    s.setEncoding('latin1')
    s.on('data', (d: string) => {
      text += d
      if (!sent && /^HTTP\/1\.1 100 Continue\r\n\r\n/.test(text)) {
        sent = true
        s.write(body)
      }
      if (parseResponses(text, [false]).length > 0) { clearTimeout(timer); done() }
    })
    s.on('close', () => { clearTimeout(timer); done() })
    s.on('error', () => {})
  })
}

test('node engine: Expect: 100-continue gets its 100 only after routing, limits and authentication said yes', async (t) => {
  const { lb, a } = await start(t)
  const big = await expectContinue(lb.port, 'POST /up HTTP/1.1\r\nhost: a.test\r\ncontent-length: 100\r\nexpect: 100-continue\r\n\r\n', 'x'.repeat(100))
  assert.match(big.text, /^HTTP\/1\.1 413 /, 'max_body says no: 413 at once, no 100 before it')
  assert.equal(big.sawContinue, false)
  const anon = await expectContinue(lb.port, 'POST /priv/x HTTP/1.1\r\nhost: a.test\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n', 'hello')
  assert.match(anon.text, /^HTTP\/1\.1 401 /, 'basicAuth says no: 401 at once, no 100 before it')
  assert.equal(anon.sawContinue, false)
  const auth = 'authorization: Basic ' + Buffer.from('u:p').toString('base64') + '\r\n'
  const ok = await expectContinue(lb.port, `POST /priv/y HTTP/1.1\r\nhost: a.test\r\n${auth}content-length: 5\r\nexpect: 100-continue\r\n\r\n`, 'hello')
  assert.equal(ok.sawContinue, true, ok.text)
  assert.match(ok.text, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK\r\n/)
  assert.match(ok.text, /a POST \/priv\/y host=a\.test body=hello/)
  assert.deepEqual(a.requests.map((x) => x.url), ['/priv/y'])
})

test('node engine: a WebSocket upgrade is tunnelled to the server (messages, subprotocol, close code)', async (t) => {
  const web = await startWsEcho('web', { protocols: ['chat'] })
  const other = await echoBackend('b')
  t.after(async () => { await web.close(); await other.close() })
  const lb = await startLb(config(web, other))
  t.after(async () => { await lb.stop(); rmSync(lb.dir, { recursive: true, force: true }) })
  const ws = await connect(`ws://127.0.0.1:${lb.port}/chat`, {}, ['x', 'chat'])
  assert.equal(ws.protocol, 'chat', 'the server\'s choice')
  ws.send('hello')
  assert.equal((await nextMessage(ws)).data.toString(), 'hello')
  const big = Buffer.alloc(100_000, 7)
  ws.send(big)
  const m = await nextMessage(ws)
  assert.equal(m.binary, true)
  assert.ok(m.data.equals(big))
  const done = closed(ws)
  ws.close(4001, 'bye')
  assert.deepEqual(await done, { code: 4001, reason: 'bye' })
  await waitFor(() => web.events.includes('close:4001:bye'), 'the server to get the close code')
})
