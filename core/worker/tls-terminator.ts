// TLS for mTLS entry points (an https entry point with tls.ca), on node:tls.
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
// Certificates are re-read on refresh() (every config generation, so SIGHUP):
// setSecureContext applies to new handshakes, established connections keep theirs.
import net from 'node:net'
import tls from 'node:tls'
import { readFileSync } from 'node:fs'
import type { EntryPointConf } from '../config/static.js'
import { TLS13_SUITES, type TlsConf } from '../config/tls.js'
import { proxyV2Header } from '../net/proxy-protocol.js'
import { listenServer } from '../net/listen.js'

const conns = new Set<tls.TLSSocket>()

/** Client connections this thread's terminators hold open. */
export function openTerminated (): number {
  return conns.size
}

interface Contexts {
  readonly main: tls.SecureContextOptions
  /** exact host → context, and "*.domain" wildcards under their domain suffix ".domain" */
  readonly exact: Map<string, tls.SecureContext>
  readonly wildcard: Map<string, tls.SecureContext>
}

/** Reads every file now; throws (with OpenSSL's reason) when one is unusable. */
function loadContexts (conf: TlsConf): Contexts {
  const ca = readFileSync(conf.ca)
  const common = { ca, minVersion: 'TLSv1.2' as const, ciphers: `${TLS13_SUITES}:${conf.ciphers}`, honorCipherOrder: true }
  const main = { ...common, cert: readFileSync(conf.cert), key: readFileSync(conf.key) }
  tls.createSecureContext(main) // validates now, so a bad file is reported here rather than at the next handshake
  const exact = new Map<string, tls.SecureContext>()
  const wildcard = new Map<string, tls.SecureContext>()
  for (const s of conf.sni) {
    const ctx = tls.createSecureContext({ ...common, cert: readFileSync(s.cert), key: readFileSync(s.key) })
    for (const h of s.hosts) {
      if (h.startsWith('*.')) wildcard.set(h.slice(1), ctx)
      else exact.set(h, ctx)
    }
  }
  return { main, exact, wildcard }
}

export class TlsTerminator {
  readonly #ep: EntryPointConf
  readonly #conf: TlsConf
  readonly #workers: number
  readonly #socketPath: (worker: number) => string
  readonly #handshakeMs: () => number
  #contexts: Contexts
  #server: tls.Server | null = null
  #next = 0

  /** Throws when the certificate files are unusable. */
  constructor (ep: EntryPointConf, workers: number, socketPath: (worker: number) => string, handshakeMs: () => number) {
    this.#ep = ep
    this.#conf = ep.tls!
    this.#workers = workers
    this.#socketPath = socketPath
    this.#handshakeMs = handshakeMs
    this.#contexts = loadContexts(this.#conf)
  }

  async listen (): Promise<boolean> {
    const server = tls.createServer({
      ...this.#contexts.main,
      requestCert: true,
      rejectUnauthorized: true, // no certificate, or one that does not chain to `ca`: the handshake fails
      handshakeTimeout: this.#handshakeMs(),
      SNICallback: (name, cb) => cb(null, this.#sni(name)),
    })
    server.on('secureConnection', (sock) => this.#relay(sock))
    server.on('tlsClientError', () => { /* refused handshakes (no or bad client certificate, old TLS): nothing to do */ })
    server.on('error', () => { /* listen errors are reported through listen() */ })
    const ok = await listenServer(server, this.#ep.host, this.#ep.port)
    if (ok) this.#server = server
    return ok
  }

  /** Stops accepting; established connections carry on. */
  close (): void {
    this.#server?.close()
    this.#server = null
  }

  /** Re-reads the certificate files; throws (keeping the current ones) when they are unusable. */
  refresh (): void {
    const next = loadContexts(this.#conf)
    this.#contexts = next
    this.#server?.setSecureContext(next.main)
  }

  #sni (name: string): tls.SecureContext | undefined {
    const host = name.toLowerCase()
    const c = this.#contexts
    const exact = c.exact.get(host)
    if (exact !== undefined) return exact
    const dot = host.indexOf('.')
    // undefined: the server's default context
    return dot > 0 ? c.wildcard.get(host.slice(dot)) : undefined
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
