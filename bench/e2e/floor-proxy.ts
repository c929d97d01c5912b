// The floor of CPU per request for a proxy on lb's stack: uWS in, node:net
// out, the same keep-alive pooling and the same system calls per request as
// lb, and nothing else. It forwards the request head with the forwarding
// headers, takes the response's framing from Content-Length, and answers with
// the status and body only (upstream headers dropped). No routing, stats,
// health, time-outs, request bodies or chunked responses: it is a yardstick,
// not a proxy. lb's cost above it is what lb's features cost; its cost is
// what uWS, V8, node's streams and the kernel charge any proxy here.
//
//   PORT=9310 UPSTREAMS=127.0.0.1:9101,127.0.0.1:9102 node dist/bench/e2e/floor-proxy.js
import net from 'node:net'
import { loadUws } from '../../core/worker/transport/uws/native.js'

const uws = loadUws()
const port = Number(process.env.PORT ?? 9310)
const ups = (process.env.UPSTREAMS ?? '127.0.0.1:9101,127.0.0.1:9102').split(',').map((a) => {
  const i = a.lastIndexOf(':')
  return { host: a.slice(0, i), port: Number(a.slice(i + 1)) }
})
const READ = Buffer.allocUnsafe(64 * 1024)
const idle: Conn[][] = ups.map(() => [])
let next = 0

interface Res { aborted: boolean, cork (cb: () => void): void, writeStatus (s: string): void, end (b: Uint8Array): void }

class Conn {
  readonly up: number
  res: Res | null = null
  #ready = false
  #queued = ''
  readonly #socket: net.Socket

  constructor (up: number) {
    this.up = up
    const onread = { buffer: READ, callback: (n: number) => this.#read(n) }
    this.#socket = net.connect({ ...ups[up]!, noDelay: true, onread } as net.NetConnectOpts)
    this.#socket.on('connect', () => {
      this.#ready = true
      if (this.#queued !== '') this.#socket.write(this.#queued)
      this.#queued = ''
    })
    this.#socket.on('error', () => {})
  }

  send (res: Res, head: string): void {
    this.res = res
    if (this.#ready) this.#socket.write(head)
    else this.#queued = head
  }

  /** Assumes the whole response in one read, as the benchmark's small responses are. */
  #read (n: number): boolean {
    const head = READ.toString('latin1', 0, Math.min(n, 1024))
    const end = head.indexOf('\r\n\r\n') + 4
    const cl = head.indexOf('Content-Length: ')
    const len = Number(head.slice(cl + 16, head.indexOf('\r', cl)))
    const res = this.res!
    this.res = null
    idle[this.up]!.push(this)
    if (!res.aborted) {
      res.cork(() => {
        res.writeStatus(head.slice(9, head.indexOf('\r')) + '\r\ncontent-type: text/plain')
        res.end(READ.subarray(end, end + len))
      })
    }
    return true
  }
}

uws.App().any('/*', (res, req) => {
  const q = req.getQuery()
  let head = req.getCaseSensitiveMethod() + ' ' + req.getUrl() + (q === undefined || q === '' ? '' : '?' + q) + ' HTTP/1.1\r\n'
  let xff = ''
  req.forEach((k, v) => {
    if (k === 'x-forwarded-for') xff = v + ', '
    else if (k !== 'connection') head += k + ': ' + v + '\r\n'
  })
  const ip = new Uint8Array(res.getRemoteAddress()).slice(-4).join('.')
  head += 'x-real-ip: ' + ip + '\r\nx-forwarded-for: ' + xff + ip + '\r\nx-forwarded-proto: http\r\n\r\n'
  const r = res as unknown as Res
  r.aborted = false
  res.onAborted(() => { r.aborted = true })
  const up = next++ % ups.length
  const conn = idle[up]!.pop() ?? new Conn(up)
  conn.send(r, head)
}).listen('127.0.0.1', port, (token) => {
  if (token === false) {
    console.error(`floor-proxy: cannot listen on 127.0.0.1:${port}`)
    process.exit(1)
  }
})
