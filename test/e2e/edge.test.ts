// What the edge answers to request forms and malformed requests (the README's
// table "Request forms at the edge"), over raw sockets: each gets its answer at
// once, with "Connection: close" once, and nothing reaches the backend. After an
// answer that closes the connection, lb reads nothing more from it: a request
// sent behind a framing error in the same write is never forwarded.
import { strict as assert } from 'node:assert'
import net from 'node:net'
import { test } from 'node:test'
import { type Lb, simpleConfig, startBackend, startLb } from '../helpers.js'

/** Sends `bytes` in one write; resolves with everything read until the server closes (or `ms` passed: `timedOut`). */
function exchange (port: number, bytes: string, ms = 3000): Promise<{ text: string, timedOut: boolean, elapsed: number }> {
  return new Promise((resolve) => {
    const t0 = Date.now()
    const s = net.connect(port, '127.0.0.1', () => s.write(bytes, 'latin1'))
    let text = ''
    s.setEncoding('latin1')
    s.on('data', (d: string) => { text += d })
    s.on('error', () => {}) // a reset after the answer: what was read counts
    const timer = setTimeout(() => { s.destroy(); resolve({ text, timedOut: true, elapsed: Date.now() - t0 }) }, ms)
    s.on('close', () => { clearTimeout(timer); resolve({ text, timedOut: false, elapsed: Date.now() - t0 }) })
  })
}

const NEXT = 'GET /SMUGGLED HTTP/1.1\r\nhost: a\r\n\r\n'

// request → the status line it gets; every one closes the connection
const CASES: Array<[string, string, string]> = [
  ['HTTP/1.0', 'GET /x HTTP/1.0\r\nhost: a\r\n\r\n', '505 HTTP Version Not Supported'],
  ['HTTP/1.0 without Host', 'GET /x HTTP/1.0\r\n\r\n', '505 HTTP Version Not Supported'],
  ['absolute form', 'GET http://a/x HTTP/1.1\r\nhost: a\r\n\r\n', '505 HTTP Version Not Supported'],
  ['OPTIONS *', 'OPTIONS * HTTP/1.1\r\nhost: a\r\n\r\n', '505 HTTP Version Not Supported'],
  ['HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', '505 HTTP Version Not Supported'],
  ['HTTP/0.9', 'GET /x\r\n\r\n', '505 HTTP Version Not Supported'],
  ['bare LF line ends', 'GET /x HTTP/1.1\nhost: a\n\n', '505 HTTP Version Not Supported'],
  ['HTTP/1.1 without Host', 'GET /x HTTP/1.1\r\n\r\n', '400 Bad Request'],
  ['two Host headers', 'GET /x HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n', '400 Bad Request'],
  ['Content-Length and Transfer-Encoding', 'POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n', '400 Bad Request'],
  ['negative Content-Length', 'POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: -1\r\n\r\n', '400 Bad Request'],
  ['huge Content-Length', 'POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 99999999999999999999\r\n\r\n', '400 Bad Request'],
  ['empty Content-Length', 'POST /x HTTP/1.1\r\nhost: a\r\ncontent-length:\r\n\r\n', '400 Bad Request'],
  ['empty Content-Length, Connection: close', 'POST /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\ncontent-length:\r\n\r\n', '400 Bad Request'],
  ['bad chunk size', 'POST /x HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n', '400 Bad Request'],
  ['space before the colon', 'GET /x HTTP/1.1\r\nhost : a\r\n\r\n', '400 Bad Request'],
  ['obs-fold', 'GET /x HTTP/1.1\r\nhost: a\r\nx-a: b\r\n c\r\n\r\n', '400 Bad Request'],
  ['NUL in a header value', 'GET /x HTTP/1.1\r\nhost: a\r\nx-a: b\0c\r\n\r\n', '400 Bad Request'],
  // over twice limits.max_header_bytes (16 KiB): uWS's own 431; between, lb's (test/e2e/head-limit.test.ts)
  ['header section over twice max_header_bytes', `GET /x HTTP/1.1\r\nhost: a\r\nx-a: ${'a'.repeat(40_000)}\r\n\r\n`, '431 Request Header Fields Too Large'],
  ['request line over twice max_header_bytes', `GET /${'a'.repeat(40_000)} HTTP/1.1\r\nhost: a\r\n\r\n`, '431 Request Header Fields Too Large'],
]

/** lb in front of a backend that records every request it gets ("METHOD /path"). */
async function start (t: { after: (fn: () => Promise<void>) => void }): Promise<{ lb: Lb, seen: string[] }> {
  const seen: string[] = []
  const web = await startBackend('web', (req, res) => { seen.push(`${req.method!} ${req.url!}`); req.resume(); req.on('end', () => res.end('ok')) })
  const lb = await startLb(simpleConfig([web.address]))
  t.after(async () => { await lb.stop(); await web.close() })
  return { lb, seen }
}

test('every request form and malformed request gets its answer at once, closes, and reaches no backend', async (t) => {
  const { lb, seen } = await start(t)
  for (const [name, bytes, status] of CASES) {
    const r = await exchange(lb.port, bytes)
    assert.equal(r.timedOut, false, `${name}: answered and closed at once (${JSON.stringify(r.text)})`)
    assert.equal(r.text.split('\r\n')[0], `HTTP/1.1 ${status}`, name)
    assert.equal(r.text.match(/^connection: close\r$/gim)?.length, 1, `${name}: one Connection: close`)
  }
  assert.deepEqual(seen, [], 'nothing reached the backend')
  // a good request on the same entry point still works
  assert.match((await exchange(lb.port, 'GET /ok HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n')).text, /^HTTP\/1\.1 200 /)
  assert.deepEqual(seen, ['GET /ok'])
})

test('after an answer that closes the connection nothing more is read: a request behind a framing error is never forwarded', async (t) => {
  const { lb, seen } = await start(t)
  for (const [name, bytes, status] of CASES) {
    if (name === 'HTTP/0.9') continue // uWS waits for the rest of its request line: closed by its idle time-out (README)
    const r = await exchange(lb.port, bytes + NEXT)
    assert.equal(r.timedOut, false, `${name}: closed at once`)
    // the error answer, or (lb's own refusals, answered on the next turn) none: uWS closes a connection
    // on which another request arrives before the answer
    if (r.text !== '') assert.equal(r.text.split('\r\n')[0], `HTTP/1.1 ${status}`, name)
    assert.ok((r.text.match(/^connection: close\r$/gim)?.length ?? 0) <= 1, `${name}: Connection: close at most once`)
    assert.doesNotMatch(r.text, /HTTP\/1\.1 200/, `${name}: no second answer`)
  }
  assert.deepEqual(seen, [], 'the backend never saw a request sent behind a framing error')
})
