// The floor of node:http2 on one thread, for bench/h2/h2.ts: what any proxy
// built on node:http2 (lb's h2 entry points and h2 upstreams) pays at least,
// with none of a proxy's work. Three listeners:
//   TLS h2     answers every stream itself: 16 B on /, 4 KiB on /big (what the
//              backend nginx serves), so no upstream at all: node:tls and
//              node:http2 answering, a bound from above for the h2-16B and h2-4KiB loads
//   TLS h2 fwd forwards each stream's GET to the backend nginx over HTTP/1.1
//              keep-alive node:net connections (as lb's upstream client does),
//              status and body back, framing from Content-Length only: the floor
//              of lb's h2 design (node:http2 in, node:net out) for those loads
//   h2c gRPC   forwards each stream to the gRPC backend over one node:http2
//              client session: headers, body and trailers passed as they come,
//              no routing, limits, logs, health or metrics: the bound for grpc-unary
// It is a yardstick, not a proxy: errors destroy the stream, nothing is checked.
//
//   node dist/bench/h2/floor-h2.js H2_PORT GRPC_PORT GRPC_BACKEND_PORT CERT KEY FWD_PORT BACKEND_PORT
import { readFileSync } from 'node:fs'
import http2 from 'node:http2'
import net from 'node:net'

const [h2Port, grpcPort, backendPort, cert, key, fwdPort, webPort] = process.argv.slice(2)
const SMALL = Buffer.from('{"status":"ok"}\n')
const BIG = Buffer.alloc(4096, 'x')

const tls = http2.createSecureServer({ cert: readFileSync(cert!), key: readFileSync(key!), allowHTTP1: false })
tls.on('stream', (stream, headers) => {
  const body = headers[':path'] === '/big' ? BIG : SMALL
  stream.on('error', () => {})
  stream.respond({ ':status': 200, 'content-type': 'text/plain', 'content-length': body.length })
  stream.end(body)
})
tls.listen(Number(h2Port), '127.0.0.1')

/** One keep-alive HTTP/1.1 connection to the backend, one request at a time; idle ones wait in `idle`. */
class Upstream {
  #stream: http2.ServerHttp2Stream | null = null
  #got: Buffer[] = []
  #have = 0
  /** head + body bytes of the response being read; 0: its head is not complete yet */
  #want = 0
  #status = 200
  #bodyAt = 0
  readonly #socket = net.connect({ port: Number(webPort), host: '127.0.0.1', noDelay: true })

  constructor () {
    this.#socket.on('data', (d: Buffer) => this.#read(d))
    this.#socket.on('error', () => this.#stream?.destroy())
    this.#socket.on('close', () => { const i = idle.indexOf(this); if (i >= 0) idle.splice(i, 1) })
  }

  send (stream: http2.ServerHttp2Stream, path: string): void {
    this.#stream = stream
    this.#socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-forwarded-proto: https\r\n\r\n`)
  }

  #read (d: Buffer): void {
    this.#got.push(d)
    this.#have += d.length
    const all = this.#got.length === 1 ? d : Buffer.concat(this.#got)
    if (this.#want === 0) {
      const end = all.indexOf('\r\n\r\n')
      if (end < 0) return
      const head = all.toString('latin1', 0, end)
      const cl = /content-length: *(\d+)/i.exec(head)
      this.#status = Number(head.slice(9, 12))
      this.#bodyAt = end + 4
      this.#want = this.#bodyAt + Number(cl?.[1] ?? 0)
    }
    if (this.#have < this.#want) return
    const s = this.#stream!
    const body = all.subarray(this.#bodyAt, this.#want)
    this.#stream = null
    this.#got = []
    this.#have = 0
    this.#want = 0
    idle.push(this)
    if (s.destroyed) return
    s.respond({ ':status': this.#status, 'content-type': 'text/plain', 'content-length': body.length })
    s.end(body)
  }
}
const idle: Upstream[] = []
const fwd = http2.createSecureServer({ cert: readFileSync(cert!), key: readFileSync(key!), allowHTTP1: false })
fwd.on('stream', (stream, headers) => {
  stream.on('error', () => {})
  ;(idle.pop() ?? new Upstream()).send(stream, headers[':path']!)
})
fwd.listen(Number(fwdPort), '127.0.0.1')

// one session to the backend, made again when it is gone (the backend may start after this process)
let up: http2.ClientHttp2Session | null = null
const session = (): http2.ClientHttp2Session => {
  if (up === null || up.closed || up.destroyed) {
    up = http2.connect(`http://127.0.0.1:${backendPort}`)
    up.on('error', () => {})
  }
  return up
}
const grpc = http2.createServer()
grpc.on('stream', (stream, headers) => {
  const u = session().request({ ':method': 'POST', ':path': headers[':path'], 'content-type': headers['content-type'], te: 'trailers' })
  let trailers: http2.OutgoingHttpHeaders = {}
  const fail = (): void => { u.destroy(); stream.destroy() }
  u.on('error', fail)
  stream.on('error', fail)
  u.on('response', (h) => {
    if (stream.destroyed) { // the client went first (h2load ending its run)
      u.destroy()
      return
    }
    stream.respond({ ':status': h[':status'], 'content-type': h['content-type'] }, { waitForTrailers: true })
    u.pipe(stream)
  })
  u.on('trailers', (t) => { trailers = t['grpc-message'] === undefined ? { 'grpc-status': t['grpc-status'] } : { 'grpc-status': t['grpc-status'], 'grpc-message': t['grpc-message'] } })
  stream.on('wantTrailers', () => stream.sendTrailers(trailers))
  stream.pipe(u)
})
grpc.listen(Number(grpcPort), '127.0.0.1')
