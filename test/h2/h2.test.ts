// HTTP/2 to clients through the real balancer (2 workers): ALPN h2 on an https
// entry point with http2.enabled, h2c with prior knowledge, and the default
// (no h2 offered). Real clients: node:http2, curl --http2 and
// --http2-prior-knowledge, h2load; the abusive ones (rapid reset, CONTINUATION
// flood) are written here with node:http2's session API and hand-built frames.
import { strict as assert } from 'node:assert'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { createHash } from 'node:crypto'
import http2 from 'node:http2'
import https from 'node:https'
import net from 'node:net'
import tls from 'node:tls'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, startBackend, startLb, waitFor } from '../helpers.js'
import { requireTool } from '../admin/util.js'
import { type Certs, makeCerts } from '../tls/certs.js'

interface H2Reply { status: number, headers: http2.IncomingHttpHeaders, body: string }

/** One request on `session` (or on a new one to `url`, closed after). */
function h2get (url: string, headers: http2.OutgoingHttpHeaders = {}, body: string | null = null, session?: http2.ClientHttp2Session): Promise<H2Reply> {
  const s = session ?? http2.connect(url, { rejectUnauthorized: false })
  return new Promise((resolve, reject) => {
    s.on('error', reject)
    const req = s.request({ ':path': '/', ...headers }, { endStream: body === null })
    let status = 0
    let got: http2.IncomingHttpHeaders = {}
    let text = ''
    req.setEncoding('utf8')
    req.on('response', (h) => { status = Number(h[':status']); got = h })
    req.on('data', (d: string) => { text += d })
    req.on('end', () => { if (session === undefined) s.close(); resolve({ status, headers: got, body: text }) })
    req.on('error', reject)
    if (body !== null) req.end(body)
  })
}

const echo: Parameters<typeof startBackend>[1] = (req, res, name) => {
  let body = ''
  req.setEncoding('utf8')
  req.on('data', (d: string) => { body += d })
  req.on('end', () => {
    res.setHeader('content-type', 'application/json')
    res.setHeader('set-cookie', ['a=1', 'b=2'])
    res.end(JSON.stringify({ name, method: req.method, url: req.url, headers: req.headers, body }))
  })
}

// never execFileSync: the backends run in this process
const run = promisify(execFile)

async function curl (args: string[]): Promise<string> {
  return (await run('curl', ['-s', '-k', '--max-time', '10', ...args], { encoding: 'utf8' })).stdout
}

let certs: Certs
let backend: Backend
let lb: Lb
let h2s = 0 // https, http2 enabled
let h2c = 0 // protocol h2c
let plain = 0 // https, http2 not enabled (the default)
const PASS = 'sesame'

before(async () => {
  certs = makeCerts()
  backend = await startBackend('web', echo)
  const sha = createHash('sha1').update(PASS).digest('base64')
  lb = await startLb(`
[global]
workers = 2
access_log = "{{DIR}}/access.log"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.h2s]
address = "127.0.0.1:0"
protocol = "https"
http2 = true
[entrypoints.h2s.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
[entrypoints.plain]
address = "127.0.0.1:0"
protocol = "https"
[entrypoints.plain.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
[entrypoints.h2c]
address = "127.0.0.1:0"
protocol = "h2c"
[entrypoints.h2c.http2]
max_concurrent_streams = 100
[middlewares.auth]
type = "basicAuth"
users = ["ann:{SHA}${sha}"]
[routers.private]
rule = "PathPrefix(\`/private\`)"
middlewares = ["auth"]
service = "web"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "${backend.address}"
check = false
`)
  h2s = await lb.portOf('h2s')
  h2c = await lb.portOf('h2c')
  plain = await lb.portOf('plain')
})

after(async () => {
  await lb?.stop()
  await backend?.close()
  rmSync(certs.dir, { recursive: true, force: true })
})

describe('HTTP/2 on an https entry point (ALPN)', () => {
  test('ALPN offers h2 then http/1.1 with http2 = true, nothing by default', async () => {
    const alpn = (port: number, offer: string[]): Promise<string | false> => new Promise((resolve, reject) => {
      const s = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false, ALPNProtocols: offer }, () => {
        resolve(s.alpnProtocol ?? false)
        s.destroy()
      })
      s.on('error', reject)
    })
    assert.equal(await alpn(h2s, ['h2', 'http/1.1']), 'h2')
    // no h2 offered: the connection goes unread to a worker's uWS app, whose TLS selects no protocol
    assert.equal(await alpn(h2s, ['http/1.1']), false)
    assert.equal(await alpn(h2s, []), false)
    assert.equal(await alpn(plain, ['h2', 'http/1.1']), false)
  })

  test('a client that shows no whole ClientHello within 50 ms is served by node:tls (ALPN http/1.1), and well', async () => {
    const raw = net.connect(h2s, '127.0.0.1')
    await new Promise((resolve) => raw.once('connect', resolve))
    await new Promise((resolve) => setTimeout(resolve, 150))
    const s = tls.connect({ socket: raw, servername: 'localhost', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] })
    await new Promise((resolve, reject) => { s.once('secureConnect', resolve); s.once('error', reject) })
    assert.equal(s.alpnProtocol, 'http/1.1')
    s.write('GET /late HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
    let text = ''
    s.setEncoding('utf8')
    s.on('data', (d: string) => { text += d })
    await new Promise((resolve) => s.once('end', resolve))
    assert.match(text, /^HTTP\/1\.1 200 [\s\S]*"url":"\/late"/)
  })

  test('without lb\'s addon (LB_FD_PEEK=off) every client is served by the terminator: ALPN http/1.1, and h2 still', async (t) => {
    const off = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.h2s]
address = "127.0.0.1:0"
protocol = "https"
http2 = true
[entrypoints.h2s.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "${backend.address}"
check = false
`, { env: { LB_FD_PEEK: 'off' } })
    t.after(() => off.stop())
    const port = await off.portOf('h2s')
    assert.match(await curl(['--http1.1', '-w', '\n%{http_version}', `https://127.0.0.1:${port}/off`]), /"url":"\/off"[\s\S]*\n1\.1$/)
    const s = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] })
    await new Promise((resolve, reject) => { s.once('secureConnect', resolve); s.once('error', reject) })
    assert.equal(s.alpnProtocol, 'http/1.1', 'node:tls selected it')
    s.destroy()
    assert.equal((await h2get(`https://127.0.0.1:${port}`, { ':path': '/off-h2' })).status, 200)
  })

  test('HTTP/1.1 clients that skip node:tls: 40 connections of 5 keep-alive requests, each with its real client address', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 40, rejectUnauthorized: false })
    const get = (i: number): Promise<any> => new Promise((resolve, reject) => {
      https.get({ host: '127.0.0.1', port: h2s, path: `/k${i}`, agent }, (res) => {
        let body = ''
        const alpn = (res.socket as tls.TLSSocket).alpnProtocol
        res.setEncoding('utf8')
        res.on('data', (d: string) => { body += d })
        res.on('end', () => resolve({ alpn, ...JSON.parse(body) }))
      }).on('error', reject)
    })
    const all = await Promise.all(Array.from({ length: 200 }, (_, i) => get(i)))
    agent.destroy()
    assert.deepEqual(all.map((r) => r.url), Array.from({ length: 200 }, (_, i) => `/k${i}`))
    for (const r of all) {
      assert.equal(r.alpn, false)
      assert.equal(r.headers['x-real-ip'], '127.0.0.1')
      assert.equal(r.headers['x-forwarded-proto'], 'https')
    }
  })

  test('a request over h2 is routed and proxied as over HTTP/1.1: Host from :authority, X-Forwarded-Proto https', async () => {
    const r = await h2get(`https://127.0.0.1:${h2s}`, { ':path': '/a/../b//c?x=1', cookie: 'k=1', 'x-two': 'v' })
    assert.equal(r.status, 200)
    const got = JSON.parse(r.body)
    assert.equal(got.url, '/b/c?x=1') // the normalised path
    assert.equal(got.headers.host, `127.0.0.1:${h2s}`)
    assert.equal(got.headers['x-forwarded-proto'], 'https')
    assert.equal(got.headers['x-real-ip'], '127.0.0.1')
    assert.equal(got.headers.cookie, 'k=1')
    assert.deepEqual(r.headers['set-cookie'], ['a=1', 'b=2'])
    assert.equal(r.headers.connection, undefined)
  })

  test('request bodies, with and without content-length, reach the server whole', async () => {
    const big = 'x'.repeat(200_000) // beyond the 64 KiB stream window: flow control both ways
    const a = JSON.parse((await h2get(`https://127.0.0.1:${h2s}`, { ':method': 'POST', 'content-length': String(big.length) }, big)).body)
    assert.equal(a.body.length, big.length)
    const b = JSON.parse((await h2get(`https://127.0.0.1:${h2s}`, { ':method': 'POST' }, 'hello')).body)
    assert.equal(b.body, 'hello')
    assert.equal(b.headers['transfer-encoding'], 'chunked')
  })

  test('a body of declared length is read to its last byte in pieces; one longer or shorter than declared is refused', async () => {
    const send = (s: http2.ClientHttp2Session, declared: number, pieces: string[]): Promise<{ status: number, body: string, rst: number }> => new Promise((resolve) => {
      const req = s.request({ ':method': 'POST', ':path': '/len', 'content-length': String(declared) }, { endStream: false })
      let status = 0
      let body = ''
      req.setEncoding('utf8')
      req.on('response', (h) => { status = Number(h[':status']) })
      req.on('data', (d: string) => { body += d })
      req.on('error', () => { /* the reset: rstCode */ })
      req.on('close', () => resolve({ status, body, rst: req.rstCode ?? 0 }))
      // each piece its own DATA frame, a turn apart: the body arrives over several reads
      const next = (i: number): void => {
        if (i === pieces.length - 1) { req.end(pieces[i]); return }
        req.write(pieces[i], () => setTimeout(() => next(i + 1), 5))
      }
      next(0)
    })
    const session = (): http2.ClientHttp2Session => http2.connect(`https://127.0.0.1:${h2s}`, { rejectUnauthorized: false }).on('error', () => { /* Node 22's GOAWAY */ })
    const s = session()
    try {
      const ok = await send(s, 30_000, ['a'.repeat(10_000), 'b'.repeat(10_000), 'c'.repeat(10_000)])
      assert.equal(ok.status, 200)
      assert.equal(JSON.parse(ok.body).body, 'a'.repeat(10_000) + 'b'.repeat(10_000) + 'c'.repeat(10_000))
    } finally { s.close() }
    // a stream reset with PROTOCOL_ERROR on Node 20; the whole session ended (GOAWAY INTERNAL_ERROR) on Node 22 (README, "HTTP/2")
    const seen = backend.requests.length
    for (const [declared, sent] of [[5, '0123456789'], [10, '01234']] as const) {
      const bad = session()
      const r = await send(bad, declared, [sent])
      bad.destroy()
      assert.equal(r.status, 0, `content-length ${declared} with ${sent.length} bytes: no answer`)
      assert.ok(r.rst === http2.constants.NGHTTP2_PROTOCOL_ERROR || r.rst === http2.constants.NGHTTP2_INTERNAL_ERROR, `reset with ${r.rst}`)
    }
    const whole = backend.requests.slice(seen).filter((r) => r.body > 0 && r.body === Number(r.headers['content-length']))
    assert.deepEqual(whole, [], 'neither reached the server as a whole request')
    // lb goes on serving
    const again = session()
    try { assert.equal(JSON.parse((await send(again, 3, ['xyz'])).body).body, 'xyz') } finally { again.close() }
  })

  test('middlewares apply: basicAuth answers 401 over h2 and lets the right password through', async () => {
    const url = `https://127.0.0.1:${h2s}`
    assert.equal((await h2get(url, { ':path': '/private/x' })).status, 401)
    const ok = await h2get(url, { ':path': '/private/x', authorization: 'Basic ' + Buffer.from(`ann:${PASS}`).toString('base64') })
    assert.equal(ok.status, 200)
  })

  test('lb\'s own answers over h2: the entry point\'s /health', async () => {
    const r = await h2get(`https://127.0.0.1:${h2s}`, { ':path': '/health' })
    assert.equal(r.status, 200)
    assert.equal(r.body, 'OK\n')
  })

  test('HTTP/1.1 on the same entry point is still served (ALPN http/1.1 → a worker\'s uWS app)', async () => {
    const out = await curl(['--http1.1', '-w', '\n%{http_version}', `https://127.0.0.1:${h2s}/one`])
    assert.match(out, /"url":"\/one"[\s\S]*\n1\.1$/)
  })

  test('curl --http2 speaks h2 with http2 = true, and HTTP/1.1 where it is off', async () => {
    assert.match(await curl(['--http2', '-w', '\n%{http_version}', `https://127.0.0.1:${h2s}/c`]), /"x-forwarded-proto":"https"[\s\S]*\n2$/)
    assert.match(await curl(['--http2', '-w', '\n%{http_version}', `https://127.0.0.1:${plain}/c`]), /\n1\.1$/)
  })

  test('100 concurrent streams on one session are all answered', async () => {
    const s = http2.connect(`https://127.0.0.1:${h2s}`, { rejectUnauthorized: false })
    const all = await Promise.all(Array.from({ length: 100 }, async (_, i) => h2get('', { ':path': `/s${i}` }, null, s)))
    s.close()
    assert.deepEqual(all.map((r) => JSON.parse(r.body).url), Array.from({ length: 100 }, (_, i) => `/s${i}`))
  })

  test('h2load: a short run over TLS, every request 2xx', async (t) => {
    if (requireTool(t, 'h2load', 'nghttp2-client') === null) return
    const out = (await run('h2load', ['-n', '2000', '-c', '4', '-m', '10', `https://127.0.0.1:${h2s}/load`], { encoding: 'utf8', timeout: 60_000 })).stdout
    assert.match(out, /requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored/)
    assert.match(out, /status codes: 2000 2xx/)
    assert.match(out, /Application protocol: h2/)
  })
})

describe('h2c (protocol = "h2c")', () => {
  test('the access log says HTTP/2.0 for an h2 request, nothing for HTTP/1.1 (as before)', async () => {
    await h2get(`http://127.0.0.1:${h2c}`, { ':path': '/logged-h2' })
    await curl([`${lb.url}/logged-h1`])
    const lines = await waitFor(() => {
      const text = readFileSync(join(lb.dir, 'access.log'), 'utf8')
      return text.includes('/logged-h2') && text.includes('/logged-h1') ? text.trim().split('\n').map((l) => JSON.parse(l)) : null
    }, 'both requests in the access log')
    assert.equal(lines.find((l) => l.path === '/logged-h2').protocol, 'HTTP/2.0')
    assert.equal(lines.find((l) => l.path === '/logged-h2').entrypoint, 'h2c')
    assert.equal(lines.find((l) => l.path === '/logged-h1').protocol, undefined)
  })

  test('curl --http2-prior-knowledge is routed; X-Forwarded-Proto http', async () => {
    const out = await curl(['--http2-prior-knowledge', '-w', '\n%{http_version}', `http://127.0.0.1:${h2c}/p`])
    assert.match(out, /"url":"\/p"[\s\S]*"x-forwarded-proto":"http"[\s\S]*\n2$/)
  })

  test('node:http2 over h2c; HTTP/1.1 there is not routed', async () => {
    const r = await h2get(`http://127.0.0.1:${h2c}`, { ':path': '/n' })
    assert.equal(JSON.parse(r.body).url, '/n')
    const seen = backend.requests.length
    // curl reads node:http2's GOAWAY as garbage and fails: what matters is that nothing is routed
    const out = await run('curl', ['-s', '--http1.1', '--max-time', '5', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${h2c}/n`], { encoding: 'utf8' })
      .then((r) => r.stdout, (err: { stdout: string }) => err.stdout)
    assert.notEqual(out.trim(), '200')
    assert.equal(backend.requests.length, seen)
  })
})

/** Frames by hand (RFC 9113 §4.1): 9-byte header then payload. */
function frame (type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(9)
  h.writeUIntBE(payload.length, 0, 3)
  h[3] = type
  h[4] = flags
  h.writeUInt32BE(stream, 5)
  return Buffer.concat([h, payload])
}
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')
const SETTINGS = 0x4
const HEADERS = 0x1
const CONTINUATION = 0x9

describe('HTTP/2 abuse: the abuser is closed, others are served', () => {
  test('rapid reset (CVE-2023-44487): streams opened and reset in a loop end the session', async () => {
    const s = http2.connect(`http://127.0.0.1:${h2c}`)
    s.on('error', () => {})
    const closed = new Promise<void>((resolve) => s.on('close', () => resolve()))
    let sent = 0
    const burst = (): void => {
      // each stream a request head at once reset by the client, as the attack does
      for (let i = 0; i < 200 && !s.closed && !s.destroyed; i++) {
        try {
          const r = s.request({ ':path': '/reset' })
          r.on('error', () => {})
          r.close(http2.constants.NGHTTP2_CANCEL)
          sent++
        } catch { return }
      }
      if (!s.closed && !s.destroyed && sent < 20_000) setImmediate(burst)
    }
    s.on('connect', burst)
    await closed
    assert.ok(sent < 20_000, `lb kept the session open through ${sent} resets`)
    const r = await h2get(`http://127.0.0.1:${h2c}`, { ':path': '/after-reset' })
    assert.equal(JSON.parse(r.body).url, '/after-reset')
  })

  test('CONTINUATION flood (CVE-2024-27983, CVE-2024-28182): a head that never ends is cut off', async () => {
    const sock = net.connect(h2c, '127.0.0.1')
    sock.on('error', () => {})
    await new Promise((resolve) => sock.once('connect', resolve))
    let closed = false
    sock.on('close', () => { closed = true })
    sock.resume()
    sock.write(Buffer.concat([PREFACE, frame(SETTINGS, 0, 0, Buffer.alloc(0))]))
    // HEADERS (END_STREAM, no END_HEADERS): :method GET, :path /, :scheme http as static-table indexes (RFC 7541 A)
    sock.write(frame(HEADERS, 0x1, 1, Buffer.from([0x82, 0x84, 0x86])))
    // literal headers without indexing, each a new name: x-aaaa: v... in CONTINUATION frames without END_HEADERS
    let frames = 0
    const field = (i: number): Buffer => {
      const name = Buffer.from(`x-${i}`)
      const value = Buffer.alloc(100, 0x61)
      return Buffer.concat([Buffer.from([0x00, name.length]), name, Buffer.from([value.length]), value])
    }
    while (!closed && frames < 20_000) {
      const ok = sock.write(frame(CONTINUATION, 0, 1, field(frames++)))
      if (!ok) await new Promise((resolve) => { sock.once('drain', resolve); sock.once('close', resolve) })
      if (frames % 100 === 0) await new Promise((resolve) => setImmediate(resolve))
    }
    await new Promise<void>((resolve) => { if (closed) resolve(); else sock.once('close', () => resolve()) })
    assert.ok(frames < 20_000, `lb read ${frames} CONTINUATION frames without closing`)
    const r = await h2get(`http://127.0.0.1:${h2c}`, { ':path': '/after-flood' })
    assert.equal(JSON.parse(r.body).url, '/after-flood')
    assert.doesNotMatch(lb.log(), /worker exited|worker restart/)
  })
})
