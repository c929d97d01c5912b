// `show stat` FRONTEND bout and `show info` TotalBytesOut count what crossed
// the client socket, as HAProxy's do: response heads as uWS writes them (its
// Date, uWebSockets, Content-Length, Transfer-Encoding and Connection lines
// included), bodies, and chunk framing. A raw-socket client makes a known set
// of requests, keep-alive and closing, and sums every byte it received. The
// Prometheus byte counters keep counting bodies (Traefik's meaning).
import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { freePort, request, simpleConfig, startBackend } from '../helpers.js'
import { sock, startAdminLb } from './util.js'

/** Body bytes of every response read by exchange(), chunk framing excluded. */
let bodies = 0

/** Reads one response from `buf`: its length in bytes once complete (its body added to `bodies`), else -1. `noBody`: a HEAD's answer. */
function responseLength (buf: Buffer, noBody: boolean): number {
  const headEnd = buf.indexOf('\r\n\r\n')
  if (headEnd < 0) return -1
  const head = buf.toString('latin1', 0, headEnd).toLowerCase()
  const bodyAt = headEnd + 4
  const status = Number(head.slice(9, 12))
  if (noBody || status === 204 || status === 304) return bodyAt
  const cl = /\r\ncontent-length: (\d+)/.exec(head)
  if (cl !== null) {
    if (buf.length < bodyAt + Number(cl[1])) return -1
    bodies += Number(cl[1])
    return bodyAt + Number(cl[1])
  }
  assert.match(head, /\r\ntransfer-encoding: chunked/)
  // chunked: walk the size lines (no trailers here)
  let at = bodyAt
  let sizes = 0
  for (;;) {
    const eol = buf.indexOf('\r\n', at)
    if (eol < 0) return -1
    const size = parseInt(buf.toString('latin1', at, eol), 16)
    const next = eol + 2 + size + 2
    if (buf.length < next) return -1
    sizes += size
    if (size === 0) {
      bodies += sizes
      return next
    }
    at = next
  }
}

/**
 * Sends `requests` one after another on one connection, each once the previous
 * answer is complete; resolves with every byte received (the connection is
 * ended by the client, or closed by lb after a closing answer).
 */
function exchange (port: number, requests: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1')
    let all = Buffer.alloc(0)
    let from = 0 // where the answer being read starts in `all`
    let i = 0
    const send = (): void => { c.write(requests[i]!) }
    c.on('connect', send)
    c.on('data', (d: Buffer) => {
      all = Buffer.concat([all, d])
      const n = responseLength(all.subarray(from), requests[i]!.startsWith('HEAD '))
      if (n < 0) return
      from += n
      if (++i < requests.length) send()
      else c.end()
    })
    c.on('close', () => resolve(all))
    c.on('error', reject)
  })
}

async function frontendBout (path: string): Promise<number> {
  const lines = (await sock(path, 'show stat')).trim().split('\n')
  const header = lines[0]!.slice(2).split(',')
  const row = lines.find((l) => l.startsWith('web,FRONTEND,'))!.split(',')
  return Number(row[header.indexOf('bout')])
}

async function promBodies (dash: string): Promise<number> {
  const text = (await request(`${dash}/metrics`)).body
  return Number(/^lb_entrypoint_responses_bytes_total\{entrypoint="web",protocol="http"\} (\d+)$/m.exec(text)![1])
}

async function totalBytesOut (path: string): Promise<number> {
  return Number(/^TotalBytesOut: (\d+)$/m.exec(await sock(path, 'show info'))![1])
}

// the same sums whatever writes the heads: uWS, or node:http on the node engine (transport/node/client.ts counts its head text)
for (const engine of ['uws', 'node'] as const) {
  test(`${engine}: FRONTEND bout and TotalBytesOut are the bytes the clients received, heads and framing included`, async () => {
    bodies = 0
    const big = 'x'.repeat(300_000)
    const be = await startBackend('b', (req, res) => {
      req.resume()
      req.on('end', () => {
        if (req.url === '/chunked') {
          res.setHeader('x-kind', 'chunked')
          res.write('abc')
          setTimeout(() => { res.write('0123456789abcdefg'); res.end('tail') }, 20)
        } else if (req.url === '/cached') {
          res.writeHead(304, { etag: '"v1"' })
          res.end()
        } else if (req.url === '/empty') {
          res.writeHead(204)
          res.end()
        } else if (req.url === '/big') {
          res.end(big)
        } else {
          res.setHeader('content-type', 'text/plain')
          res.end('hello')
        }
      })
    })
    const dead = await freePort()
    const a = await startAdminLb(simpleConfig([be.address], '', `[routers.dead]
rule = "Host(\`dead\`) && PathPrefix(\`/\`)"
service = "dead"

[services.dead]
[[services.dead.servers]]
name = "d1"
address = "127.0.0.1:${dead}"
check = false
`).replace('address = "127.0.0.1:{{PORT}}"', `address = "127.0.0.1:{{PORT}}"\nengine = "${engine}"`))
    try {
      const bout0 = await frontendBout(a.sock)
      const total0 = await totalBytesOut(a.sock)
      const prom0 = await promBodies(a.dash)
      const get = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: example\r\n${extra}\r\n`
      const received = await Promise.all([
      // keep-alive: a small answer, a chunked one, a HEAD, a 304, a 204, a long one, lb's own 502
        exchange(a.lb.port, [get('/'), get('/chunked'), 'HEAD / HTTP/1.1\r\nHost: example\r\n\r\n', get('/cached'),
          get('/empty'), get('/big'), get('/', 'Host: dead\r\n').replace('Host: example\r\n', ''), get('/'),
          // the entry point's health location, answered by lb and not counted as a request
          get('/health'), 'HEAD /health HTTP/1.1\r\nHost: example\r\n\r\n']),
        // the client closes: lb says Connection: close in its head
        exchange(a.lb.port, [get('/', 'Connection: close\r\n')]),
        exchange(a.lb.port, [get('/chunked', 'Connection: close\r\n')]),
        exchange(a.lb.port, ['HEAD / HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n']),
        // lb closes after its own 400 (a DEL byte in a value): uWS adds the Connection: close line
        exchange(a.lb.port, [get('/', 'X-Bad: a\x7fb\r\n')]),
      ])
      const sum = received.reduce((n, b) => n + b.length, 0)
      // the set really covers what it says: the status lines and framing lines received
      const lines = received.map((b) => [...b.toString('latin1').matchAll(/HTTP\/1\.1 \d{3}[^\r]*|(?<=\r\n)(?:transfer-encoding|connection):[^\r]*/gi)].join(' | '))
      if (engine === 'uws') {
        assert.deepEqual(lines, [
          'HTTP/1.1 200 OK | HTTP/1.1 200 OK | Transfer-Encoding: chunked | HTTP/1.1 200 OK | HTTP/1.1 304 Not Modified | ' +
        'HTTP/1.1 204 No Content | HTTP/1.1 200 OK | HTTP/1.1 502 Bad Gateway | HTTP/1.1 200 OK | HTTP/1.1 200 OK | HTTP/1.1 200 OK',
          'HTTP/1.1 200 OK | connection: close',
          'HTTP/1.1 200 OK | connection: close | Transfer-Encoding: chunked',
          'HTTP/1.1 200 OK | connection: close',
          'HTTP/1.1 400 Bad Request | Connection: close',
        ])
      } else {
        // node:http's own lines (Connection: keep-alive on each answer), and llhttp's 400 for the DEL byte
        assert.match(lines.join(' | '), /304 Not Modified.*204 No Content.*502 Bad Gateway.*400 Bad Request \| connection: close$/s)
      }
      assert.ok(sum > big.length)
      assert.equal(await frontendBout(a.sock) - bout0, sum, 'show stat FRONTEND bout')
      assert.equal(await totalBytesOut(a.sock) - total0, sum, 'show info TotalBytesOut')
      // Prometheus: the bodies of counted requests, as Traefik's (the health answer's 3 body bytes are no request's)
      // on the node engine llhttp answers the DEL byte itself (no request was made): its body is no request's either
      const refused = engine === 'node' ? received[4]!.length - received[4]!.indexOf('\r\n\r\n') - 4 : 0
      assert.equal(await promBodies(a.dash) - prom0, bodies - 'OK\n'.length - refused, 'lb_entrypoint_responses_bytes_total')
    } finally {
      await a.lb.stop()
      await be.close()
    }
  })
}
