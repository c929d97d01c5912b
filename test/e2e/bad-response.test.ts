// A server that answers with a malformed response: the client gets 502 (or,
// when the head was already passed on, its connection cut), and the log says
// why, naming the service, the server (name and address) and the reason, as
// nginx's "upstream sent invalid header ... while reading response header from
// upstream" does. The same reason from the same server is logged at most once
// per 10 s in a worker, so a server (or a client asking for the URL that
// breaks it) cannot flood the log.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Lb, sleep, startLb } from '../helpers.js'
import { type RawBackend, exchange, startRawBackend } from './raw-http.js'

/** Each malformed answer by request path, with the reason and detail lb logs for it. */
const CASES: Record<string, { wire: string, reason: string, detail?: string }> = {
  '/status-line': { wire: 'HTTP/1.1 2x0 OK\r\ncontent-length: 0\r\n\r\n', reason: 'invalid status line', detail: '"HTTP/1.1 2x0 OK"' },
  '/two-lengths': { wire: 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc', reason: 'conflicting Content-Length headers', detail: '3 and 30' },
  // no end of head ever comes, and the connection stays open: refused at once, not at the server time-out
  '/garbage': { wire: 'SSH-2.0-OpenSSH_9.2p1\r\n', reason: 'invalid status line', detail: '"SSH-2.0-OpenSSH_9.2p1\\r\\n"' },
  '/html': { wire: '<html><body>hello</body></html>\r\n\r\n', reason: 'invalid status line' },
  '/big-head': { wire: `HTTP/1.1 200 OK\r\nX-Big: ${'v'.repeat(70_000)}\r\ncontent-length: 0\r\n\r\n`, reason: 'response head too large', detail: 'over 65536 bytes' },
  '/folded': { wire: 'HTTP/1.1 200 OK\r\nSet-Cookie: id=secret-token\r\n more\r\ncontent-length: 0\r\n\r\n', reason: 'invalid header line', detail: 'a folded line (obs-fold)' },
  '/gzip': { wire: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n', reason: 'unsupported Transfer-Encoding', detail: '"gzip"' },
}

const PATHS = [...Object.keys(CASES), '/chunk-size', '/limited']

function answer (head: string): string {
  const path = head.slice(head.indexOf(' ') + 1, head.indexOf(' HTTP/')).replace(/\?.*/, '')
  if (path === '/chunk-size') return 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n'
  if (path === '/limited') return CASES['/two-lengths']!.wire
  return CASES[path]?.wire ?? 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'
}

/** Each path has its service and server (s1/raw1, s2/raw2...): the log's rate limit is per server and reason, and several cases share a reason. */
function config (backend: string): string {
  return PATHS.map((path, i) => `
[routers.r${i + 1}]
rule = "Path(\`${path}\`)"
service = "s${i + 1}"
[[services.s${i + 1}.servers]]
name = "raw${i + 1}"
address = "${backend}"
check = false
max_fails = 0
`).join('')
}

/** The log lines of bad responses, parsed. */
function badLines (log: string): Array<Record<string, unknown>> {
  return log.split('\n').filter((l) => l.includes('upstream server sent an invalid response')).map((l) => JSON.parse(l) as Record<string, unknown>)
}

describe('malformed responses from a server', () => {
  let backend: RawBackend, lb: Lb
  before(async () => {
    backend = await startRawBackend(answer)
    // one worker: the rate limit is per worker; max_fails = 0: a server stays in whatever it answers
    lb = await startLb(`[entrypoints.web]\naddress = "127.0.0.1:{{PORT}}"\n${config(backend.address)}`, { workers: 1 })
  })
  after(async () => {
    await lb?.stop()
    await backend?.close()
  })

  test('502 for each, and one error line naming the service, the server, its address and the reason (never a header value)', async () => {
    for (const [i, [path, c]] of Object.entries(CASES).entries()) {
      const r = await exchange(lb.port, `GET ${path}?token=abc HTTP/1.1\r\nHost: a\r\n\r\n`)
      assert.equal(r.status, 502, `${path}: ${r.text.slice(0, 200)}`)
      const line = await lb.logMatching(new RegExp(`"request":"GET ${path}"`), 5000)
      const o = badLines(line).find((l) => l.request === `GET ${path}`)!
      assert.equal(o.level, 'error', path)
      assert.equal(o.msg, `upstream server sent an invalid response (${c.reason}) while reading the response head: answered 502`, path)
      assert.equal(o.code, 'LB_ERR_UPSTREAM_PROTOCOL')
      assert.deepEqual([o.service, o.server, o.address, o.reason], [`s${i + 1}`, `raw${i + 1}`, backend.address, c.reason], path)
      if (c.detail !== undefined) assert.equal(o.detail, c.detail, path)
    }
    assert.doesNotMatch(lb.log(), /secret-token|token=abc/, 'neither a header value nor the query reaches the log')
  })

  test('a bad chunk size after the head went out: the client connection is cut, the log says so', async () => {
    const r = await exchange(lb.port, 'GET /chunk-size HTTP/1.1\r\nHost: a\r\n\r\n', { waitClose: true })
    assert.ok(r.closed, 'the client connection is closed')
    assert.ok(!r.text.includes('0\r\n\r\n'), `no end of the chunked body reaches the client: ${JSON.stringify(r.text)}`)
    const line = await lb.logMatching(/"request":"GET \/chunk-size"/, 5000)
    const o = badLines(line).find((l) => l.request === 'GET /chunk-size')!
    assert.equal(o.msg, 'upstream server sent an invalid response (invalid chunk size) while reading the response body: the client connection was cut')
    const n = PATHS.indexOf('/chunk-size') + 1
    assert.deepEqual([o.service, o.server, o.address, o.detail], [`s${n}`, `raw${n}`, backend.address, '"zz"'])
  })

  test('the same reason from the same server: one line per 10 s however many requests', async () => {
    for (let i = 0; i < 21; i++) assert.equal((await exchange(lb.port, 'GET /limited HTTP/1.1\r\nHost: a\r\n\r\n')).status, 502)
    await lb.logMatching(/"request":"GET \/limited"/, 5000)
    await sleep(300) // worker log lines reach stderr through the control plane: let any more arrive
    assert.equal(badLines(lb.log()).filter((l) => l.request === 'GET /limited').length, 1, 'one line for 21 bad responses within the window of the first')
  })
})
