// A request body that arrives with its head (a small upload in the request's
// packet, an h2 DATA frame read with its HEADERS) goes to the backend in the
// same system call as the head, not one write more per piece
// (core/upstream/connection.ts writeAtTurnEnd). Counted by the kernel: lb's
// write system calls (/proc/PID/io syscw: write and writev, which node:net uses
// upstream; uWS answers clients with send, not counted) over many requests,
// with no access log (its lines are written too). A mirror's copy alike.
import { strict as assert } from 'node:assert'
import { existsSync, readFileSync } from 'node:fs'
import http2 from 'node:http2'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, simpleConfig, startBackend, startLb, waitFor } from '../helpers.js'

const N = 200
const ioReadable = existsSync('/proc/self/io')

describe('a body that came with its head goes upstream in the head\'s write', { skip: ioReadable ? false : 'needs /proc/PID/io (Linux)' }, () => {
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

  /** lb's write system calls per request for N requests sent one after another by `send`, after 20 to warm up */
  async function perRequest (send: () => Promise<void>): Promise<number> {
    for (let i = 0; i < 20; i++) await send()
    bodies.length = 0
    const before = writes()
    for (let i = 0; i < N; i++) await send()
    return (writes() - before) / N
  }

  /** one request on `s`, its answer read to the backend's "ok" */
  const exchange = (s: net.Socket, request: string): Promise<void> => new Promise((resolve) => {
    let got = ''
    const onData = (d: Buffer): void => {
      got += d.toString()
      if (!got.endsWith('ok')) return
      s.off('data', onData)
      resolve()
    }
    s.on('data', onData)
    s.write(request)
  })
  const connect = async (): Promise<net.Socket> => {
    const s = net.connect(lb.port, '127.0.0.1')
    await new Promise((resolve) => s.once('connect', resolve))
    return s
  }

  test('HTTP/1.1 with Content-Length: head and body in one write', async () => {
    const s = await connect()
    const n = await perRequest(() => exchange(s, 'POST /up HTTP/1.1\r\nhost: t\r\ncontent-length: 16\r\n\r\n0123456789abcdef'))
    s.destroy()
    assert.deepEqual(new Set(bodies), new Set(['0123456789abcdef']))
    assert.equal(bodies.length, N)
    // 2 before: the head, then the body
    assert.ok(n < 1.2, `${n} write system calls per request`)
  })

  test('HTTP/1.1 chunked: head, chunks and last chunk in one write', async () => {
    // a connection each: lb closes one that carried a chunked body after its answer (README, "Chunked request bodies")
    const n = await perRequest(async () => {
      const s = await connect()
      await exchange(s, 'POST /up HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n')
      s.destroy()
    })
    assert.deepEqual(new Set(bodies), new Set(['hello world']))
    // 8 before: the head, each chunk's size line, data and CRLF, the last chunk
    assert.ok(n < 1.2, `${n} write system calls per request`)
  })

  test('a mirror\'s copy: head and body in one write', async () => {
    const s = await connect()
    const seen = mirror.requests.length
    const n = await perRequest(() => exchange(s, 'POST /mirrored HTTP/1.1\r\nhost: t\r\ncontent-length: 16\r\n\r\n0123456789abcdef'))
    s.destroy()
    await waitFor(() => mirror.requests.length - seen >= N + 20, 'every copy at the mirror')
    assert.equal(bodies.length, N)
    // 3 before: the main server's request (one), then the copy's head and body
    assert.ok(n < 2.2, `${n} write system calls per mirrored request`)
  })

  test('HTTP/2: HEADERS and DATA in one write upstream', async () => {
    const session = http2.connect(`http://127.0.0.1:${h2Port}`)
    try {
      const n = await perRequest(() => new Promise((resolve, reject) => {
        const s = session.request({ ':method': 'POST', ':path': '/up', 'content-length': '16' })
        s.end('0123456789abcdef')
        s.resume()
        s.on('end', () => resolve())
        s.on('error', reject)
      }))
      assert.deepEqual(new Set(bodies), new Set(['0123456789abcdef']))
      // 4 before; node:http2's own writes to the client are counted too
      assert.ok(n < 2.2, `${n} write system calls per request`)
    } finally { session.close() }
  })
})
