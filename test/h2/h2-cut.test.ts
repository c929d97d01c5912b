// A response the server cuts short (its connection closed after part of the
// body) must not reach an HTTP/2 client as complete: lb resets the client's
// stream (RST_STREAM INTERNAL_ERROR) with no END_STREAM before it, as nginx
// does, where an HTTP/1.1 client gets its connection closed. Servers: an
// HTTP/1.1 one (chunked and Content-Length bodies) and an h2c one; clients:
// node:http2 and curl (exit 92: "stream was not closed cleanly").
import { strict as assert } from 'node:assert'
import { execFile } from 'node:child_process'
import { rmSync } from 'node:fs'
import http from 'node:http'
import http2 from 'node:http2'
import type net from 'node:net'
import { after, before, test } from 'node:test'
import { promisify } from 'node:util'
import { type Lb, startLb } from '../helpers.js'
import { requireTool } from '../admin/util.js'
import { type Certs, makeCerts } from '../tls/certs.js'

const SENT = 30_000 // bytes the server sends before it closes

/** An HTTP/1.1 server that sends SENT bytes of a longer body, then closes: `/cl` with Content-Length, else chunked. */
function cutting1 (): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    res.writeHead(200, req.url === '/cl' ? { 'content-length': 100_000 } : {})
    res.write(Buffer.alloc(SENT, 97))
    setTimeout(() => req.socket.destroy(), 100)
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

/** An h2c server that sends SENT bytes of a body, then destroys its session (socket closed, no END_STREAM). */
function cutting2 (): Promise<http2.Http2Server> {
  const server = http2.createServer()
  server.on('stream', (stream, h) => {
    if (h[':path'] === '/h2-early') { stream.session?.destroy(); return } // closed before any answer
    stream.respond({ ':status': 200 })
    stream.write(Buffer.alloc(SENT, 98))
    setTimeout(() => stream.session?.destroy(), 100)
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

interface Outcome { status: number, bytes: number, ended: boolean, rstCode: number }

/** One GET on a new h2 session: whether the response ended (END_STREAM) or was reset, and with which code. */
function h2get (url: string, path: string): Promise<Outcome> {
  const s = http2.connect(url, { rejectUnauthorized: false })
  s.on('error', () => {})
  return new Promise((resolve) => {
    const r = s.request({ ':path': path })
    const o: Outcome = { status: 0, bytes: 0, ended: false, rstCode: -1 }
    r.on('response', (h) => { o.status = Number(h[':status']) })
    r.on('data', (d: Buffer) => { o.bytes += d.length })
    r.on('end', () => { o.ended = true })
    r.on('error', () => {})
    r.on('close', () => { o.rstCode = r.rstCode ?? -1; s.close(); resolve(o) })
  })
}

const run = promisify(execFile)

/** curl's exit code and what it printed (-w): 0 means it took the response as complete. */
async function curl (args: string[]): Promise<{ code: number, out: string }> {
  try {
    const { stdout } = await run('curl', ['-s', '-k', '-o', '/dev/null', '-w', '%{http_code} %{size_download}', '--max-time', '10', ...args], { encoding: 'utf8' })
    return { code: 0, out: stdout }
  } catch (err) {
    const e = err as { code: number, stdout: string }
    return { code: e.code, out: e.stdout }
  }
}

let certs: Certs
let b1: http.Server
let b2: http2.Http2Server
let lb: Lb
let h2s = 0
let h2c = 0

before(async () => {
  certs = makeCerts()
  b1 = await cutting1()
  b2 = await cutting2()
  const port = (s: net.Server): number => (s.address() as net.AddressInfo).port
  lb = await startLb(`
[global]
workers = 2
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.h2s]
address = "127.0.0.1:0"
protocol = "https"
http2 = true
[entrypoints.h2s.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
[entrypoints.h2c]
address = "127.0.0.1:0"
protocol = "h2c"
[routers.h2]
rule = "PathPrefix(\`/h2\`)"
service = "h2"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "127.0.0.1:${port(b1)}"
check = false
max_fails = 0
[services.h2]
protocol = "h2c"
[[services.h2.servers]]
address = "127.0.0.1:${port(b2)}"
check = false
max_fails = 0
`)
  h2s = await lb.portOf('h2s')
  h2c = await lb.portOf('h2c')
})

after(async () => {
  await lb?.stop()
  b1?.closeAllConnections()
  await new Promise((resolve) => b1?.close(resolve))
  await new Promise((resolve) => b2?.close(resolve))
  rmSync(certs.dir, { recursive: true, force: true })
})

for (const [name, path] of [['chunked', '/'], ['Content-Length', '/cl'], ['HTTP/2 (h2c service)', '/h2']] as const) {
  test(`a ${name} response the server cuts short: the h2 client's stream is reset (INTERNAL_ERROR), never ended`, async () => {
    for (const url of [`https://localhost:${h2s}`, `http://127.0.0.1:${h2c}`]) {
      const o = await h2get(url, path)
      assert.equal(o.status, 200, url)
      assert.equal(o.bytes, SENT, `${url}: what the server sent is relayed`)
      assert.equal(o.ended, false, `${url}: no END_STREAM for a cut response`)
      assert.equal(o.rstCode, http2.constants.NGHTTP2_INTERNAL_ERROR, url)
    }
  })
}

test('an h2c server that closes before answering: the h2 client gets 502, not an empty 200', async () => {
  for (const url of [`https://localhost:${h2s}`, `http://127.0.0.1:${h2c}`]) {
    const o = await h2get(url, '/h2-early')
    assert.equal(o.status, 502, url)
    assert.equal(o.ended, true, `${url}: lb's own answer is whole`)
  }
})

test('curl over h2 sees the cut (exit 92), as over HTTP/1.1 (exit 18)', async (t) => {
  if (requireTool(t, 'curl', 'curl') === null) return
  const h2 = await curl(['--http2', `https://localhost:${h2s}/`])
  assert.equal(h2.code, 92, `curl --http2: ${h2.out}`)
  const prior = await curl(['--http2-prior-knowledge', `http://127.0.0.1:${h2c}/h2`])
  assert.equal(prior.code, 92, `curl --http2-prior-knowledge: ${prior.out}`)
  const h1 = await curl([`http://127.0.0.1:${lb.port}/cl`])
  assert.equal(h1.code, 18, `curl HTTP/1.1: ${h1.out}`)
})
