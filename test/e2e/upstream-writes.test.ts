// A request body that arrives with its head (a small upload in the request's
// packet, an h2 DATA frame read with its HEADERS) goes to the backend in the
// same system call as the head, not one write more per piece
// (core/upstream/connection.ts writeAtTurnEnd). Counted by the kernel: lb's
// write system calls (/proc/PID/io syscw: write and writev, which node:net uses
// upstream; uWS answers clients with send, not counted) over many requests,
// with no access log (its lines are written too). A mirror's copy alike.
import { strict as assert } from 'node:assert'
import { readFileSync } from 'node:fs'
import http2 from 'node:http2'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, simpleConfig, startBackend, startLb, waitFor } from '../helpers.js'
import { exchange } from './raw-http.js'

const N = 200
const POST = 'POST /up HTTP/1.1\r\nhost: t\r\ncontent-length: 16\r\n\r\n0123456789abcdef'

describe('a body that came with its head goes upstream in the head\'s write', () => {
  let backend: Backend, mirror: Backend, lb: Lb, h2Port: number
  const bodies: string[] = []
  before(async () => {
    backend = await startBackend('b', (req, res) => {
      let body = ''
      req.setEncoding('utf8')
      req.on('data', (d: string) => { body += d })
      req.on('end', () => { bodies.push(body); res.end('ok') })
    })
    mirror = await startBackend('m', (req, res) => { req.resume(); req.on('end', () => res.end('dropped')) })
    lb = await startLb(`[global]\naccess_log = "off"\n\n${simpleConfig([backend.address])}
[routers.mirrored]
rule = "PathPrefix(\`/mirrored\`)"
service = "m"
[services.m]
kind = "mirroring"
service = "web"
[[services.m.mirrors]]
name = "copy"
[services.copy]
[[services.copy.servers]]
address = "${mirror.address}"
check = false
[entrypoints.h2c]
address = "127.0.0.1:0"
protocol = "h2c"
`)
    h2Port = await lb.portOf('h2c')
  })
  after(async () => { await lb?.stop(); await backend?.close(); await mirror?.close() })

  const writes = (): number => Number(/syscw: (\d+)/.exec(readFileSync(`/proc/${lb.proc.pid!}/io`, 'utf8'))![1])

  /** lb's write system calls per request while `run(N)` sends N requests, after `run(20)` to warm up */
  async function perRequest (run: (n: number) => Promise<void>): Promise<number> {
    await run(20)
    bodies.length = 0
    const before = writes()
    await run(N)
    return (writes() - before) / N
  }

  /** n requests `request` on one keep-alive connection, each sent once the answer before it is complete */
  const keepAlive = (request: string) => async (n: number): Promise<void> => {
    const a = await exchange(lb.port, Array<string>(n).fill(request), { ms: 20_000 })
    assert.equal(a.responses.filter((r) => r.status === 200).length, n)
  }

  test('HTTP/1.1 with Content-Length: head and body in one write', async () => {
    const n = await perRequest(keepAlive(POST))
    assert.deepEqual(new Set(bodies), new Set(['0123456789abcdef']))
    assert.equal(bodies.length, N)
    // 2 before: the head, then the body
    assert.ok(n < 1.2, `${n} write system calls per request`)
  })

  test('HTTP/1.1 chunked: head, chunks and last chunk in one write', async () => {
    // a connection each: lb closes one that carried a chunked body after its answer (README, "Chunked request bodies")
    const n = await perRequest(async (k) => {
      for (let i = 0; i < k; i++) {
        assert.equal((await exchange(lb.port, 'POST /up HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n')).status, 200)
      }
    })
    assert.deepEqual(new Set(bodies), new Set(['hello world']))
    // 8 before: the head, each chunk's size line, data and CRLF, the last chunk
    assert.ok(n < 1.2, `${n} write system calls per request`)
  })

  test('a mirror\'s copy: head and body in one write', async () => {
    const seen = mirror.requests.length
    const n = await perRequest(keepAlive(POST.replace('/up', '/mirrored')))
    await waitFor(() => mirror.requests.length - seen >= N + 20, 'every copy at the mirror')
    assert.equal(bodies.length, N)
    // 4 before: head and body each for the main server and for the copy
    assert.ok(n < 2.2, `${n} write system calls per mirrored request`)
  })

  test('HTTP/2: HEADERS and DATA in one write upstream', async () => {
    const session = http2.connect(`http://127.0.0.1:${h2Port}`)
    const post = (): Promise<void> => new Promise((resolve, reject) => {
      const s = session.request({ ':method': 'POST', ':path': '/up', 'content-length': '16' })
      s.end('0123456789abcdef')
      s.resume()
      s.on('end', () => resolve())
      s.on('error', reject)
    })
    try {
      const n = await perRequest(async (k) => { for (let i = 0; i < k; i++) await post() })
      assert.deepEqual(new Set(bodies), new Set(['0123456789abcdef']))
      // 4 before; node:http2's own writes to the client are counted too
      assert.ok(n < 2.2, `${n} write system calls per request`)
    } finally { session.close() }
  })
})
