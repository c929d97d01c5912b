// The floor of node:http2 on one thread, for bench/h2/h2.ts: what any proxy
// built on node:http2 (lb's h2 entry points and h2 upstreams) pays at least,
// with none of a proxy's work. Two listeners:
//   TLS h2     answers every stream itself: 16 B on /, 4 KiB on /big (what the
//              backend nginx serves), so no upstream at all: node:tls and
//              node:http2 answering, the bound for the h2-16B and h2-4KiB loads
//   h2c gRPC   forwards each stream to the gRPC backend over one node:http2
//              client session: headers, body and trailers passed as they come,
//              no routing, limits, logs, health or metrics: the bound for grpc-unary
// It is a yardstick, not a proxy: errors destroy the stream, nothing is checked.
//
//   node dist/bench/h2/floor-h2.js H2_PORT GRPC_PORT GRPC_BACKEND_PORT CERT KEY
import { readFileSync } from 'node:fs'
import http2 from 'node:http2'

const [h2Port, grpcPort, backendPort, cert, key] = process.argv.slice(2)
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
