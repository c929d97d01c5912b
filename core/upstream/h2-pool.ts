// HTTP/2 to one server (a service with protocol = "h2c", or "h2": over TLS
// with ALPN h2, as [services.X.tls] says; gRPC): one session
// per server per worker, every request a stream on it, so calls multiplex
// instead of queueing for connections. node:http2 queues streams past the
// server's SETTINGS_MAX_CONCURRENT_STREAMS itself. A session that closed or
// got GOAWAY is replaced by the next request; streams in flight on it finish.
// Also h2Once: one request on a session of its own, for the control plane's
// gRPC health checks (core/control/grpc-check.ts), so node:http2 stays here.
import http2 from 'node:http2'
import net from 'node:net'
import tls from 'node:tls'
import type { ServerConf } from '../config/dynamic.js'
import type { UpstreamTlsConf } from '../config/upstream-tls.js'
import { onServerHandshake } from './tls-handshakes.js'

export const H2_CANCEL = http2.constants.NGHTTP2_CANCEL
/** RST_STREAM NO_ERROR, and a stream's rstCode when it was not reset */
export const H2_NO_ERROR = http2.constants.NGHTTP2_NO_ERROR

/** TLS (protocol "h2"): these settings; null = cleartext (h2c). */
export type H2Tls = UpstreamTlsConf | null

/** The node:tls options of `t` for `srv`: ALPN h2 only (a server that cannot speak it fails the handshake, not a request). */
function tlsOptions (srv: ServerConf, t: UpstreamTlsConf): tls.ConnectionOptions {
  // SNI: server_name, else the address's host when it is a name; an IP address gets none (RFC 6066 §3) and is checked against IP SANs
  const name = t.serverName !== '' ? t.serverName : srv.path === '' && net.isIP(srv.host) === 0 ? srv.host : undefined
  return {
    ALPNProtocols: ['h2'],
    servername: name,
    ca: t.ca === '' ? undefined : t.ca,
    rejectUnauthorized: !t.insecureSkipVerify,
    // with server_name set, the certificate must hold that name whatever address was dialled
    checkServerIdentity: (host, cert) => tls.checkServerIdentity(name ?? host, cert),
  }
}

/** A new session to `srv` (a unix socket path as well as host:port), over TLS when `t` is set. */
function connect (srv: ServerConf, t: H2Tls): http2.ClientHttp2Session {
  if (t === null) {
    if (srv.path !== '') return http2.connect('http://localhost', { createConnection: () => net.connect({ path: srv.path }) })
    return http2.connect(`http://${srv.address}`)
  }
  const opts = tlsOptions(srv, t)
  const socket = (): tls.TLSSocket =>
    tls.connect(srv.path !== '' ? { ...opts, path: srv.path } : { ...opts, host: srv.host, port: srv.port }).once('secureConnect', onServerHandshake)
  return http2.connect(`https://${srv.path === '' ? srv.address : 'localhost'}`, { createConnection: socket })
}

export class H2Pool {
  readonly #srv: ServerConf
  readonly #tls: H2Tls
  readonly #connectTimeoutMs: number
  #session: http2.ClientHttp2Session | null = null

  constructor (srv: ServerConf, t: H2Tls, connectTimeoutMs: number) {
    this.#srv = srv
    this.#tls = t
    this.#connectTimeoutMs = connectTimeoutMs
  }

  /** the :scheme of its requests */
  get scheme (): 'http' | 'https' {
    return this.#tls === null ? 'http' : 'https'
  }

  /** A new stream on the server's session (connecting it first when needed). Its errors come as the stream's 'error'. */
  request (headers: http2.OutgoingHttpHeaders, endStream: boolean): http2.ClientHttp2Stream {
    let s = this.#session
    if (s === null || s.closed || s.destroyed) {
      s = connect(this.#srv, this.#tls)
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

/** This thread's sessions by service, server and address (and TLS settings): kept across reloads as the HTTP/1.1 pools are. */
const pools = new Map<string, H2Pool>()

export function h2Pool (key: string, srv: ServerConf, t: H2Tls, connectTimeoutMs: number): H2Pool {
  let p = pools.get(key)
  if (p === undefined) {
    p = new H2Pool(srv, t, connectTimeoutMs)
    pools.set(key, p)
  }
  return p
}

export interface H2Reply {
  /** the response's :status */
  readonly status: number
  /** response header fields, the first value of each */
  readonly headers: Readonly<Record<string, string>>
  readonly trailers: Readonly<Record<string, string>>
  readonly body: Buffer
}

/** Why h2Once failed: `connected` tells a failed connect (L4) from a bad answer (L7); `timedOut` a time-out from an error. */
export class H2OnceError extends Error {
  readonly connected: boolean
  readonly timedOut: boolean
  readonly reason: unknown

  constructor (connected: boolean, timedOut: boolean, reason: unknown) {
    super(timedOut ? 'timeout' : String((reason as Error | null)?.message ?? reason))
    this.connected = connected
    this.timedOut = timedOut
    this.reason = reason
  }
}

const first = (h: http2.IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !k.startsWith(':')) out[k] = Array.isArray(v) ? v[0]! : String(v)
  return out
}

/**
 * One request with `body` on a new session to `srv`, closed after the answer:
 * a health check must see the server as a new client would, and holds nothing
 * between checks. All of it within `timeoutMs` (ms) or it fails with timedOut.
 */
export function h2Once (srv: ServerConf, t: H2Tls, headers: http2.OutgoingHttpHeaders, body: Buffer, timeoutMs: number,
  signal: AbortSignal): Promise<H2Reply> {
  return new Promise((resolve, reject) => {
    const session = connect(srv, t)
    let connected = false
    let done = false
    const fail = (timedOut: boolean, err: unknown): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      session.destroy()
      reject(new H2OnceError(connected, timedOut, err))
    }
    const timer = setTimeout(() => fail(true, null), timeoutMs)
    signal.addEventListener('abort', () => fail(false, new Error('aborted')), { once: true })
    session.on('error', (err) => fail(false, err))
    // 'connect' comes once TCP (and TLS) are up: a failure after it is the server's answer, not its reachability
    session.once('connect', () => { connected = true })
    session.once('close', () => fail(false, new Error('session closed before the answer')))
    // no body (a GET): END_STREAM on the HEADERS frame; node:http2 does that itself for GET, and end() after it throws
    const stream = session.request(headers, { endStream: body.length === 0 })
    let status = 0
    let head: Record<string, string> = {}
    let trailers: Record<string, string> = {}
    const chunks: Buffer[] = []
    stream.on('response', (h) => { status = Number(h[':status']); head = first(h) })
    stream.on('trailers', (h) => { trailers = first(h) })
    stream.on('data', (d: Buffer) => chunks.push(d))
    stream.on('error', (err) => fail(false, err))
    stream.on('close', () => fail(false, new Error('stream reset before the answer ended')))
    stream.on('end', () => {
      if (done) return
      done = true
      clearTimeout(timer)
      session.close()
      resolve({ status, headers: head, trailers, body: Buffer.concat(chunks) })
    })
    if (body.length > 0) stream.end(body)
  })
}
