// The known HTTP/2 attacks (issue #37 point 3) against the real balancer, each
// by a raw client with hand-built frames (test/fuzz/lib/h2-frames.ts, HPACK by
// hand in hpack.ts): the abuser's stream is refused or its connection closed,
// nothing it sent is forwarded, no worker restarts, and a well-behaved client
// on its own session is served after each. Rapid reset and the CONTINUATION
// flood are in h2.test.ts; the fuzz campaign's h2 surface mixes all of them.
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import http2 from 'node:http2'
import net from 'node:net'
import { after, before, test } from 'node:test'
import { type Backend, type Lb, startBackend, startLb, waitFor } from '../helpers.js'
import { E, PREFACE, T, type Frame, data, headers, parseFrames, ping, rstStream, settings } from '../fuzz/lib/h2-frames.js'
import { h2Session } from '../fuzz/lib/h2-session.js'
import { headerBlock, hpackString, literal } from '../fuzz/lib/hpack.js'

let backend: Backend
let lb: Lb
let port = 0
let bystander: http2.ClientHttp2Session
const heads: string[] = [] // paths the backend saw, as each head came (before any body)

before(async () => {
  backend = await startBackend('web', (req, res) => {
    heads.push(req.url!)
    req.resume()
    req.on('end', () => res.end(`served ${req.url}`))
  })
  lb = await startLb(`
[timeouts]
client = "1s"
[entrypoints.h2c]
address = "127.0.0.1:0"
protocol = "h2c"
[entrypoints.h2c.http2]
max_concurrent_streams = 10
max_header_list_size = "16k"
max_header_pairs = 32
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[[services.web.servers]]
address = "${backend.address}"
check = false
`)
  port = await lb.portOf('h2c')
  bystander = http2.connect(`http://127.0.0.1:${port}`)
  bystander.on('error', () => {})
})

after(async () => {
  bystander?.destroy()
  await lb?.stop()
  await backend?.close()
  if (lb !== undefined) rmSync(lb.dir, { recursive: true, force: true })
})

/** The well-behaved client: a request on the session it opened before the attacks. */
function served (path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = bystander.request({ ':path': path })
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (d: string) => { body += d })
    req.on('end', () => resolve(body))
    req.on('error', reject)
  })
}

async function othersServed (name: string): Promise<void> {
  assert.equal(await served(`/after-${name}`), `served /after-${name}`, 'the other client is served')
  assert.doesNotMatch(lb.log(), /worker exited|worker failed|uncaught/i, 'no worker restarted')
}

const request = (path: string, extra: Array<[string, string]> = [], method = 'GET'): Buffer =>
  headerBlock([[':method', method], [':scheme', 'http'], [':path', path], [':authority', 'attack.test'], ...extra])

test('HPACK bomb: one 4 KiB dynamic-table entry referenced 500 times (2 MB decoded) is refused, never forwarded', async () => {
  const entry = Buffer.concat([Buffer.from([0x40]), hpackString('x-bomb'), hpackString('b'.repeat(4000))]) // literal with incremental indexing
  const block = Buffer.concat([request('/bomb'), entry, Buffer.alloc(500, 0xbe)]) // 0xbe: index 62, the newest entry
  const r = await h2Session({ port, tls: false, bytes: Buffer.concat([settings([]), headers(1, block, { endStream: true })]), end: false, await: [1], timeoutMs: 5000 })
  const s = r.streams.get(1)
  assert.ok(s?.reset !== null || r.goaway !== null || (s?.status ?? 0) >= 400, `the stream is refused: ${JSON.stringify([...r.streams])}, GOAWAY ${JSON.stringify(r.goaway)}`)
  assert.ok(!heads.includes('/bomb'), 'the bomb never reached the backend')
  await othersServed('bomb')
})

test('a header list over max_header_list_size, or more fields than max_header_pairs, is refused, never forwarded', async () => {
  const big = Buffer.concat([request('/big-head'), literal('x-big', 'v'.repeat(20_000))])
  const many = request('/many-fields', Array.from({ length: 40 }, (_, i): [string, string] => [`x-f${i}`, 'v']))
  for (const [stream, block] of [[1, big], [3, many]] as const) {
    const r = await h2Session({ port, tls: false, bytes: Buffer.concat([settings([]), headers(stream, block, { endStream: true })]), end: false, await: [stream], timeoutMs: 5000 })
    const s = r.streams.get(stream)
    assert.ok(s?.reset !== null || r.goaway !== null || (s?.status ?? 0) >= 400, `stream ${stream} is refused`)
  }
  assert.ok(!heads.includes('/big-head') && !heads.includes('/many-fields'), 'neither head reached the backend')
  await othersServed('head-limits')
})

test('streams past max_concurrent_streams are refused (REFUSED_STREAM, or the connection ends): at most 10 reach the backend', async () => {
  // 14 uploads that never send their body: each stream stays open
  const frames = Array.from({ length: 14 }, (_, i) => headers(2 * i + 1, request(`/conc-${2 * i + 1}`, [['content-length', '5']], 'POST')))
  const r = await h2Session({ port, tls: false, bytes: Buffer.concat([settings([]), ...frames]), end: false, await: [27], timeoutMs: 5000 })
  const refused = [...r.streams].filter(([, s]) => s.reset === E.REFUSED_STREAM).length
  assert.ok(refused >= 4 || r.goaway?.code === E.PROTOCOL_ERROR, `streams over the limit refused: ${JSON.stringify([...r.streams])}, GOAWAY ${JSON.stringify(r.goaway)}`)
  assert.ok(heads.filter((h) => h.startsWith('/conc-')).length <= 10, `at most 10 streams forwarded: ${heads.filter((h) => h.startsWith('/conc-')).join(' ')}`)
  await othersServed('concurrent')
})

test('a stream that never sends its body is reset after timeouts.client (RST_STREAM CANCEL); others are served meanwhile', async () => {
  const bytes = Buffer.concat([settings([]), headers(1, request('/slow-body', [['content-length', '100']], 'POST')), data(1, 'x'.repeat(10))])
  const pending = h2Session({ port, tls: false, bytes, end: false, await: [1], timeoutMs: 10_000 })
  await othersServed('slow-body-meanwhile')
  const r = await pending
  assert.equal(r.streams.get(1)?.reset, E.CANCEL, `the stream is reset: ${JSON.stringify([...r.streams])}`)
  await othersServed('slow-body')
})

test('a stream whose answer waits for a window the client never opens is reset (RST_STREAM CANCEL) after timeouts.client', async () => {
  // SETTINGS_INITIAL_WINDOW_SIZE 0: lb may send the head but no DATA. Such a stream gets its timer only once its
  // answer has waited a second (transport/h2/answered.ts), so the reset comes within about timeouts.client + 2 s
  const started = Date.now()
  const bytes = Buffer.concat([settings([[0x4, 0]]), headers(1, request('/no-window'), { endStream: true })])
  const pending = h2Session({ port, tls: false, bytes, end: false, await: [1], timeoutMs: 10_000 })
  await othersServed('no-window-meanwhile')
  const r = await pending
  const s = r.streams.get(1)
  assert.equal(s?.status, 200, `the head went out: ${JSON.stringify([...r.streams])}`)
  assert.equal(s?.body, '', 'no DATA without a window')
  assert.equal(s?.reset, E.CANCEL, `the stream is reset: ${JSON.stringify([...r.streams])}`)
  assert.ok(Date.now() - started < 6000, `reset within timeouts.client + 2 s, not at the session's idle time-out (${Date.now() - started} ms)`)
  await othersServed('no-window')
})

/** Writes `frame` `n` times after the preface without reading anything, then reads: what lb sent and whether it closed. */
function flood (frame: Buffer, n: number): Promise<{ closed: boolean, frames: Frame[] }> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    s.pause() // a client that never reads: lb's ACKs pile up in its outbound queue
    let buf = Buffer.alloc(0)
    let done = false
    const finish = (closed: boolean): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      s.destroy()
      resolve({ closed, frames: parseFrames(buf).frames })
    }
    const timer = setTimeout(() => finish(false), 10_000)
    s.on('connect', () => {
      s.write(Buffer.concat([PREFACE, settings([])]))
      const batch = Buffer.concat(Array.from({ length: 1000 }, () => frame))
      for (let i = 0; i < n / 1000; i++) s.write(batch)
      setTimeout(() => s.resume(), 1000)
    })
    s.on('data', (d: Buffer) => { buf = Buffer.concat([buf, d]) })
    s.on('error', () => finish(true))
    s.on('close', () => finish(true))
  })
}

test('SETTINGS flood: a client that sends 100,000 SETTINGS and reads none of the ACKs is closed', async () => {
  const r = await flood(settings([[0x3, 100]]), 100_000)
  assert.ok(r.closed, `lb kept the connection open (${r.frames.length} frames read, ${r.frames.filter((f) => f.type === T.SETTINGS).length} SETTINGS)`)
  await waitFor(() => lb.log().includes('Flooding was detected'), 'the flood logged')
  await othersServed('settings-flood')
})

test('PING flood: a client that sends 100,000 PINGs and reads none of the ACKs is closed', async () => {
  const r = await flood(ping(Buffer.alloc(8, 1)), 100_000)
  assert.ok(r.closed, `lb kept the connection open (${r.frames.length} frames read)`)
  await othersServed('ping-flood')
})

test('a client that keeps sending malformed heads is closed once past maxSessionInvalidFrames, and logged with its address', async () => {
  // 150 streams whose heads carry an upper-case field name (RFC 9113 §8.2.1): each is an invalid frame
  const frames = Array.from({ length: 150 }, (_, i) => headers(2 * i + 1, request(`/bad-${i}`, [['X-Upper', 'v']]), { endStream: true }))
  const r = await h2Session({ port, tls: false, bytes: Buffer.concat([settings([]), ...frames]), end: false, await: [], timeoutMs: 5000 })
  assert.ok(r.closed, 'the connection is closed')
  assert.equal(heads.filter((h) => h.startsWith('/bad-')).length, 0, 'nothing forwarded')
  const logged = await waitFor(() => lb.log().split('\n').find((l) => l.includes('HTTP/2 session closed') && l.includes('"code":"ERR_HTTP2_TOO_MANY_INVALID_FRAMES"')), 'the log line')
  assert.match(logged, /"client":"127\.0\.0\.1"/)
  await othersServed('invalid-frames')
})

test('rapid reset from a raw client that keeps reading: lb closes the connection itself and logs the address', async () => {
  // 1,500 streams, each a head at once reset by the client (CVE-2023-44487), in one write; the client reads on,
  // so only lb can end the connection (nghttp2's GOAWAY alone leaves it open on Node 20)
  const frames = Array.from({ length: 1500 }, (_, i) => [headers(2 * i + 1, request(`/rr-${i}`), { endStream: true }), rstStream(2 * i + 1, E.CANCEL)]).flat()
  const r = await h2Session({ port, tls: false, bytes: Buffer.concat([settings([]), ...frames]), end: false, await: [], timeoutMs: 10_000, closeWaitMs: 5_000 })
  assert.ok(r.closed, 'the connection is closed')
  // lb's ENHANCE_YOUR_CALM; on Node 22 node:http2 may close first, with its INTERNAL_ERROR
  assert.ok(r.goaway !== null && (r.goaway.code === E.ENHANCE_YOUR_CALM || r.goaway.code === E.INTERNAL_ERROR), `GOAWAY ${r.goaway?.code}`)
  assert.ok(heads.filter((h) => h.startsWith('/rr-')).length <= 1000, 'at most the burst reached the backend')
  const logged = await waitFor(() => lb.log().split('\n').find((l) => l.includes('HTTP/2 session closed') && l.includes('"code":"RAPID_RESET"')), 'the log line')
  assert.match(logged, /"client":"127\.0\.0\.1"/)
  await othersServed('rapid-reset')
})
