// TLS on node:tls for the https entry points uWS cannot serve: mTLS ones
// (with tls.ca), and those a resolver's tls_challenge names (tls-alpn-01 needs
// ALPN, which uWS does not negotiate: tls-alpn.ts). The latter serve their
// ACME certificates by SNI here (acme-sni.ts withAcme), and pay for it as mTLS
// ones do: encryption on one thread (listeners.ts).
//
// Why not uWS: this uWS build (uSockets with BoringSSL) given a CA file asks
// for a client certificate and refuses one that does not verify, but accepts a
// client that sends none, and exposes nothing to JavaScript that would tell
// the two apart (no peer certificate accessor). node:tls can require one
// (requestCert + rejectUnauthorized), and can also limit TLS 1.3 to the
// seed's suites, which BoringSSL cannot.
//
// So the handshake happens here, and the decrypted bytes go on to a worker's
// uWS app over a unix socket (listeners.ts gives every worker one per mTLS
// entry point), preceded by a PROXY v2 header carrying the client's address.
// There the request is routed, proxied, upgraded to a WebSocket... as on any
// entry point, with X-Forwarded-Proto https. Connections are handed to the
// workers in turn; a worker that cannot be reached (restarting) is skipped.
//
// A client that offers no h2 (nor acme-tls/1) need not pay for node:tls and the
// unix-socket hop: where lb's addon is built (core/net/fd-peek.ts) and the entry
// point has no mTLS, connections are accepted paused, their ClientHello is
// peeked at (left unread), and those are handed, as descriptors, to a worker's
// uWS app for the entry point (core/shm/fd-handoff.ts), whose TLS and HTTP are
// native; uWS answers without ALPN (RFC 7301 §3.2 lets a server ignore it),
// as on any uWS entry point. What offers h2, and what does not show a whole
// ClientHello within PEEK_WAIT_MS, is served here as before.
//
// Certificates are re-read on refresh() (every config generation, so SIGHUP):
// setSecureContext applies to new handshakes, established connections keep theirs.
import net from 'node:net'
import tls from 'node:tls'
import type { Logger } from '../../log.js'
import type { AcmeAlpnChallenge } from '../../protocol.js'
import type { EntryPointConf } from '../../config/static.js'
import type { TlsConf } from '../../config/tls.js'
import { proxyV2Header } from '../../net/proxy-protocol.js'
import { parseClientHello, type ClientHello } from '../../net/client-hello.js'
import { EAGAIN, fdCalls, socketFd } from '../../net/fd-peek.js'
import { NetListener } from '../../net/listen.js'
import { ACME_TLS_1, AlpnChallenges } from './tls-alpn.js'
import { type Contexts, loadContexts, sniContext } from './tls-contexts.js'
import type { Connections } from '../connections.js'
import { h2Server } from '../transport/h2/h2.js'
import type { RequestHandler } from '../transport/listen-options.js'

/** Serves HTTP/2 sessions in this thread: what an entry point with http2.enabled gives its terminator. */
export interface H2Serving {
  readonly handler: RequestHandler
  /** counts the h2 connections (the http/1.1 ones are counted by the worker's uWS app they are handed to) */
  readonly conns: Connections
  /** where a session a client ended by breaking a protocol bound is reported */
  readonly log: Logger
}

const conns = new Set<tls.TLSSocket>()

/** Room for any ClientHello record (client-hello.ts); one buffer for every connection: a peek is synchronous. */
const PEEK = Buffer.allocUnsafe(20_000)
/** How long a connection may take to show its whole ClientHello before it is served here unread, in ms. */
const PEEK_WAIT_MS = 50

/** Client connections this thread's terminators hold open. */
export function openTerminated (): number {
  return conns.size
}

export class TlsTerminator extends NetListener {
  readonly #ep: EntryPointConf
  #conf: TlsConf
  readonly #workers: number
  readonly #socketPath: (worker: number) => string
  readonly #handshakeMs: () => number
  readonly #alpn: AlpnChallenges
  #contexts: Contexts
  #tls: tls.Server | null = null
  #next = 0
  readonly #h2: H2Serving | null
  /** gives a connection's descriptor to a worker's uWS app (fd-handoff.ts); null: every connection is served here */
  readonly #handoff: ((fd: number) => void) | null

  /**
   * `conf`: the entry point's TLS with its ACME certificates (acme-sni.ts). `handoff`: where connections that
   * need nothing of node:tls go (see the top; only with lb's addon, never with mTLS). Throws when the certificate
   * files are unusable.
   */
  constructor (ep: EntryPointConf, conf: TlsConf, workers: number, socketPath: (worker: number) => string, handshakeMs: () => number,
    h2: H2Serving | null = null, handoff: ((fd: number) => void) | null = null) {
    super()
    this.#ep = ep
    this.#h2 = h2
    this.#handoff = handoff
    this.#conf = conf
    this.#alpn = new AlpnChallenges(ep.name)
    this.#workers = workers
    this.#socketPath = socketPath
    this.#handshakeMs = handshakeMs
    this.#contexts = loadContexts(this.#conf)
  }

  /**
   * Connections are accepted by a plain net.Server and given to the TLS server
   * (which listens on nothing) through tls-alpn.ts, which answers tls-alpn-01
   * validations itself.
   */
  async listen (): Promise<boolean> {
    const mtls = this.#conf.ca !== ''
    const secure = tls.createServer({
      ...this.#contexts.main,
      requestCert: mtls,
      rejectUnauthorized: mtls, // no certificate, or one that does not chain to `ca`: the handshake fails
      handshakeTimeout: this.#handshakeMs(),
      SNICallback: (name, cb) => cb(null, this.#sni(name)),
      // http2.enabled: h2 first (RFC 9113 §3.2), http/1.1 for the rest; a client that offers neither gets
      // the no_application_protocol alert. Without: no ALPN, as on a uWS entry point.
      ...(this.#h2 !== null ? { ALPNProtocols: ['h2', 'http/1.1'] } : {}),
    })
    const h2 = this.#h2
    const h2server = h2 === null ? null : h2Server({ conf: this.#ep.http2, entrypoint: this.#ep.name, proto: 'https', handler: h2.handler, streamTimeoutMs: this.#handshakeMs, log: h2.log })
    secure.on('secureConnection', (sock) => {
      if (h2server === null || sock.alpnProtocol !== 'h2') this.#relay(sock)
      else this.#serveH2(sock, h2server, h2!.conns)
    })
    // refused handshakes (no or bad client certificate, old TLS) and those past handshakeTimeout: node:tls
    // only reports the time-out, and a connection left open here would hold a descriptor of the process for good
    secure.on('tlsClientError', (_err, sock) => { sock.destroy() })
    const serve = (sock: net.Socket): void => { secure.emit('connection', sock) }
    const server = this.#handoff === null
      ? net.createServer((sock) => this.#alpn.accept(sock, serve, this.#handshakeMs()))
      : net.createServer({ pauseOnConnect: true }, (sock) => this.#peek(sock, serve, performance.now()))
    server.on('error', () => { /* listen errors are reported through listen() */ })
    const ok = await this.bind(server, this.#ep.host, this.#ep.port)
    if (ok) this.#tls = secure
    return ok
  }

  override close (): void {
    super.close()
    this.#tls = null
  }

  /** Re-reads the certificate files of `conf` (as in the constructor); throws (keeping the current ones) when they are unusable. */
  refresh (conf: TlsConf): void {
    const next = loadContexts(conf)
    this.#conf = conf
    this.#contexts = next
    this.#tls?.setSecureContext(next.main)
  }

  /** The tls-alpn-01 challenges to answer from now on. Throws (keeping the current ones) on an unusable certificate. */
  setChallenges (challenges: Readonly<Record<string, AcmeAlpnChallenge>>): void {
    this.#alpn.set(challenges)
  }

  /** Hands `sock` on to a uWS app if its ClientHello asks for nothing node:tls alone does; else serves it here. */
  #peek (sock: net.Socket, serve: (sock: net.Socket) => void, since: number, wait = 1): void {
    if (sock.destroyed) return
    const fd = socketFd(sock)
    const n = fdCalls!.peek(fd, PEEK)
    const hello = n > 0 ? parseClientHello(PEEK.subarray(0, n)) : null
    if ((n === -EAGAIN || (hello === null && n > 0 && n < PEEK.length)) && performance.now() - since < PEEK_WAIT_MS) {
      // 1, 2, 4... ms: a client that sends nothing costs a handful of wake-ups, not one per ms
      setTimeout(() => this.#peek(sock, serve, since, wait * 2), wait)
      return
    }
    if (hello !== null && hello !== 'not-tls' && !this.#needsNodeTls(hello)) {
      const own = fdCalls!.dup(fd)
      if (own >= 0) {
        sock.destroy() // closes the socket's descriptor; the connection lives on in `own`
        this.#handoff!(own)
        return
      }
    }
    sock.resume() // paused since accepted; its bytes are all still unread
    this.#alpn.accept(sock, serve, this.#handshakeMs())
  }

  #needsNodeTls (hello: ClientHello): boolean {
    return (this.#h2 !== null && hello.alpn.includes('h2')) || hello.alpn.includes(ACME_TLS_1)
  }

  #sni (name: string): tls.SecureContext | undefined {
    return sniContext(this.#contexts, name)
  }

  /** An h2 session served in this thread, counted as a connection (global.max_connections). */
  #serveH2 (client: tls.TLSSocket, server: ReturnType<typeof h2Server>, counted: Connections): void {
    conns.add(client)
    client.once('close', () => { conns.delete(client); counted.close() })
    if (!counted.open()) {
      client.destroy()
      return
    }
    server.emit('connection', client)
  }

  #relay (client: tls.TLSSocket): void {
    conns.add(client)
    client.on('close', () => conns.delete(client))
    client.on('error', () => client.destroy())
    this.#toWorker(client, 0)
  }

  /** Hands the connection to the next worker; tries each worker once before giving up. */
  #toWorker (client: tls.TLSSocket, tried: number): void {
    if (client.destroyed) return
    if (tried === this.#workers) {
      client.destroy()
      return
    }
    const w = this.#next
    this.#next = (w + 1) % this.#workers
    const inner = net.connect({ path: this.#socketPath(w) })
    let connected = false
    inner.on('error', () => {
      if (!connected) this.#toWorker(client, tried + 1)
      else client.destroy()
    })
    inner.once('connect', () => {
      connected = true
      inner.write(proxyV2Header(client.remoteAddress ?? '127.0.0.1', client.remotePort ?? 0, client.localAddress ?? '127.0.0.1', client.localPort ?? 0))
      // bytes the client sent meanwhile waited in its (paused) stream
      client.pipe(inner)
      inner.pipe(client)
      inner.on('close', () => client.destroy())
      client.on('close', () => inner.destroy())
    })
  }
}
