// What a caller of listenHttp (core/worker/transport/uws/app.ts) gives and gets, without uWS:
// the options of one app, the handle that stops it listening, the request
// handler, and the counter of bytes sent beyond bodies.
import type { TlsConf } from '../../config/tls.js'
import type { ClientResponse } from './client.js'
import type { Connections } from '../connections.js'
import type { Ctx } from '../request/context.js'

/** Counts the bytes written to one entry point's clients beyond bodies (core/worker/transport/sent-bytes.ts). */
export interface SentCounter {
  add (bytes: number): void
}

export type RequestHandler = (ctx: Ctx, client: ClientResponse) => void

export interface Listener {
  /** the port it is bound to: the kernel's choice when the entry point asked for 0; 0 on a unix socket or without one */
  readonly port: number
  close (): void
  /** serves a connection accepted elsewhere (its descriptor, owned by the app from now on); only on an adoptOnly app */
  readonly adopt?: (fd: number) => void
}

export interface ListenOptions {
  /** https: an SSLApp with these files (its `ca` is not given to uWS, see listeners.ts); null = plain */
  readonly tls: TlsConf | null
  /** listen on this unix socket instead of host:port (the internal hop behind the mTLS terminator) */
  readonly unixPath: string
  /** no listen socket: the app serves the connections given to adopt() (core/shm/fd-handoff.ts) */
  readonly adoptOnly: boolean
  /** the peer is lb's own TLS terminator: the client address comes from the PROXY v2 header it sends */
  readonly proxied: boolean
  /** largest WebSocket message a client may send; 0 = no WebSocket route */
  readonly wsMaxMessage: number
  /** counts this app's connections and enforces global.max_connections; null = not counted */
  readonly conns: Connections | null
  /** counts response heads and chunk framing sent to this entry point's clients; null = not counted */
  readonly sent: SentCounter | null
}

export const PLAIN: ListenOptions = Object.freeze({ tls: null, unixPath: '', adoptOnly: false, proxied: false, wsMaxMessage: 0, conns: null, sent: null })

/** uSockets options for one certificate (uWS's AppOptions): it sets the TLS 1.2 minimum itself (TLS 1.0/1.1 handshakes fail). */
export function sslOptions (cert: string, key: string, ciphers: string): { cert_file_name: string, key_file_name: string, ssl_ciphers: string } {
  return { cert_file_name: cert, key_file_name: key, ssl_ciphers: ciphers }
}

/**
 * Listens on a port the kernel picks (an entry point on port 0) so that every
 * worker can then listen on it too. uSockets sets SO_REUSEPORT only on a socket
 * it was given a port for (bsd_create_listen_socket: `if (port != 0)`), and no
 * other socket can join one without it; so this takes the port the kernel
 * picked, closes that socket and binds the port again with SO_REUSEPORT, in the
 * same synchronous run (uWS calls listen's callback before listen returns).
 * Another process that took the port in that instant costs one more try.
 * `bind(port, done)` is one listen attempt.
 */
export function bindAnyPort (bind: (port: number, done: (l: Listener | null) => void) => void, done: (l: Listener | null) => void, tries = 3): void {
  bind(0, (probe) => {
    if (probe === null) {
      done(null)
      return
    }
    const port = probe.port
    probe.close()
    bind(port, (l) => {
      if (l !== null || tries <= 1) done(l)
      else bindAnyPort(bind, done, tries - 1)
    })
  })
}
