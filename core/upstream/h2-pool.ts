// HTTP/2 to one server (a service with protocol = "h2c": gRPC): one session
// per server per worker, every request a stream on it, so calls multiplex
// instead of queueing for connections. node:http2 queues streams past the
// server's SETTINGS_MAX_CONCURRENT_STREAMS itself. A session that closed or
// got GOAWAY is replaced by the next request; streams in flight on it finish.
import http2 from 'node:http2'
import type { ServerConf } from '../config/dynamic.js'

export const H2_CANCEL = http2.constants.NGHTTP2_CANCEL

export class H2Pool {
  readonly #authority: string
  readonly #connectTimeoutMs: number
  #session: http2.ClientHttp2Session | null = null

  constructor (srv: ServerConf, connectTimeoutMs: number) {
    this.#authority = `http://${srv.address}`
    this.#connectTimeoutMs = connectTimeoutMs
  }

  /** A new stream on the server's session (connecting it first when needed). Its errors come as the stream's 'error'. */
  request (headers: http2.OutgoingHttpHeaders, endStream: boolean): http2.ClientHttp2Stream {
    let s = this.#session
    if (s === null || s.closed || s.destroyed) {
      s = http2.connect(this.#authority)
      const session = s
      session.on('error', () => { /* each stream gets its own error */ })
      session.on('goaway', () => { if (this.#session === session) this.#session = null })
      session.on('close', () => { if (this.#session === session) this.#session = null })
      const t = setTimeout(() => { if (!session.connecting) return; session.destroy(new Error('connect timeout')) }, this.#connectTimeoutMs)
      session.once('connect', () => clearTimeout(t))
      session.once('close', () => clearTimeout(t))
      this.#session = session
    }
    return s.request(headers, { endStream })
  }

  close (): void {
    this.#session?.close()
    this.#session = null
  }
}

/** This thread's sessions by service, server and address: kept across reloads as the HTTP/1.1 pools are. */
const pools = new Map<string, H2Pool>()

export function h2Pool (key: string, srv: ServerConf, connectTimeoutMs: number): H2Pool {
  let p = pools.get(key)
  if (p === undefined) {
    p = new H2Pool(srv, connectTimeoutMs)
    pools.set(key, p)
  }
  return p
}
