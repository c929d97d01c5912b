// Every entry point of one data-plane worker, and what listening means for
// each protocol:
// - http, https: a uWS app per entry point in every worker, all on the same
//   address (SO_REUSEPORT: the kernel spreads connections), each with a
//   WebSocket route next to its HTTP route.
// - https with tls.ca (mTLS), named by a resolver's tls_challenge
//   (tls-alpn-01), or with http2.enabled: the TLS handshake runs on node:tls
//   in worker 0, which hands the decrypted connections to every worker's uWS
//   apps (tls/terminated.ts); ALPN h2 is served in worker 0 by
//   transport/h2/h2.ts.
// - h2c: a node:net server in worker 0 handing sessions to h2.ts (transport/h2/h2c.ts).
// - tcp: a node:net server in worker 0 (tcp-proxy.ts).
// - http, https with engine = "node": a node:http(s) server (transport/node/engine.ts)
//   in every worker on Node with net's reusePort (22.12, 23.1 on), else in
//   worker 0 alone; its TLS (mTLS and tls-alpn-01 included) is its own, so it
//   is never terminated, and new certificates apply without a new listener.
//
// Why worker 0 owns the node:net and node:tls listeners: Node 20's worker
// threads cannot share a port (net's reusePort came with Node 22.12), so one
// thread must own each. Worker 0 is already supervised (restarted with
// back-off), gets every config generation, obeys the connection cap and
// drain, and has its own counter stripe; a dedicated thread would need all of
// that again. The cost: TCP relaying and the encryption of terminated https
// entry points (mTLS, tls-alpn-01) run on that one thread (their HTTP work
// itself is spread over every worker).
//
// Certificates: on every config generation (so on SIGHUP) each worker
// re-reads its https entry points' files (only worker 0 those of terminated ones,
// as it alone holds their terminators). When their contents changed, a
// uWS entry point gets a new SSLApp listening on the same address, then the
// old listen socket is closed: established connections (keep-alive, WebSocket)
// stay on the old app, new ones get the new certificate. (Connections still in
// the old socket's accept queue at that instant are reset by Linux unless
// net.ipv4.tcp_migrate_req = 1.) The terminator swaps its secure context.
import { tlsChallengeEntrypoints } from '../config/acme.js'
import type { EntryPointConf } from '../config/static.js'
import { tlsFingerprint } from '../config/tls.js'
import { lbError } from '../errors.js'
import type { Logger } from '../log.js'
import type { AcmeAlpnChallenge, AcmeCert, WorkerData } from '../protocol.js'
import { type Shm, G_WRITING, stripeBase } from '../shm/layout.js'
import { Connections } from './connections.js'
import { SentBytes } from './transport/sent-bytes.js'
import type { DataPlane } from './dataplane.js'
import { listenHttp } from './transport/uws/app.js'
import type { Uws } from './transport/uws/native.js'
import { NODE_REUSE_PORT, type NodeListener, listenNode } from './transport/node/engine.js'
import { type Listener, type RequestHandler, PLAIN } from './transport/listen-options.js'
import { TcpListener, openSessions } from './proxy/tcp-proxy.js'
import { openTerminated } from './tls/tls-terminator.js'
import { Terminated, tlsError } from './tls/terminated.js'
import { acmeKey, withAcme } from './tls/acme-sni.js'
import { H2cListener } from './transport/h2/h2c.js'

export class EntryPoints {
  readonly #uws: Uws
  /** an entry point on port 0 is replaced by one with the port it got, so a re-listen (new certificates) keeps that port */
  readonly #eps: EntryPointConf[]
  readonly #worker: number
  readonly #workers: number
  readonly #shm: Shm
  readonly #handler: RequestHandler
  readonly #dp: () => DataPlane
  readonly #log: Logger
  /** global.max_connections: the cap every entry point's Connections holds together */
  readonly #maxConns: number
  /** what unlisten() closes, by entry point name */
  readonly #open = new Map<string, Listener>()
  /** fingerprint of the TLS files each https entry point serves now */
  readonly #prints = new Map<string, string>()
  /** the https entry points worker 0 terminates in node:tls */
  readonly #term: Terminated
  /** this worker's node engine listeners (transport/node/engine.ts), by entry point name */
  readonly #nodes = new Map<string, NodeListener>()
  /** ACME certificates served by SNI (acme-sni.ts) on the uWS https listeners, and what each serves of them */
  #acme: readonly AcmeCert[]
  readonly #acmeKeys = new Map<string, string>()
  /** tls-alpn-01 challenges pending (worker 0's terminators and the node engine answer them) */
  #alpn: Readonly<Record<string, AcmeAlpnChallenge>>
  #listening = false
  #refreshing: Promise<void> = Promise.resolve()

  /** `dp` returns the data plane generation in force. */
  constructor (uws: Uws, data: WorkerData, shm: Shm, handler: RequestHandler, dp: () => DataPlane, log: Logger) {
    this.#uws = uws
    this.#eps = [...data.config.entrypoints]
    this.#worker = data.index
    this.#workers = data.workers
    this.#shm = shm
    this.#handler = handler
    this.#dp = dp
    this.#log = log
    this.#maxConns = data.config.global.maxConnections
    this.#acme = data.acme.certs
    this.#alpn = data.acme.alpn
    this.#term = new Terminated({
      uws, worker: data.index, workers: data.workers, stateDir: data.config.global.stateDir, shm, handler, conns: (ep) => this.#conns(ep), log,
      sent: (ep) => this.#sent(ep), clientMs: () => dp().conf.timeouts.clientMs, prints: this.#prints, acmeKeys: this.#acmeKeys,
    }, tlsChallengeEntrypoints(data.config.certificatesResolvers))
  }

  /** Whether the entry point is a web one with its own listener in every worker (uWS, or the node engine), not one of worker 0's node:net servers (tcp, h2c) or node:tls terminators. */
  #isWeb (ep: EntryPointConf): boolean {
    return ep.protocol !== 'tcp' && ep.protocol !== 'h2c' && !this.#term.is(ep)
  }

  /** The counter of bytes sent beyond bodies to the clients of entry point number `ep` (its row in this worker's stripe). */
  #sent (ep: number): SentBytes {
    return new SentBytes(this.#shm, this.#worker, ep)
  }

  /** The counter of this worker's client connections on entry point number `ep` (its FRONTEND's; global.max_connections). */
  #conns (ep: number): Connections {
    return new Connections(this.#shm, this.#worker, ep, this.#maxConns)
  }

  /** Internal listeners, the terminators' certificates, then the public listeners. Throws LB_ERR_LISTEN or LB_ERR_TLS. */
  async start (): Promise<void> {
    await this.#term.start(this.#eps, this.#acme, this.#alpn)
    await this.listen()
  }

  /** Opens every public listener this worker hosts. Throws LB_ERR_LISTEN or LB_ERR_TLS. */
  async listen (): Promise<void> {
    this.#listening = true
    // worker 0's tcp listeners and TLS terminators before the web listeners: the web entry points
    // come up last, so a client that waits for one finds every other port open (core/main.ts)
    const order = [...this.#eps.entries()].sort(([, a], [, b]) => Number(this.#isWeb(a)) - Number(this.#isWeb(b)))
    for (const [i, ep] of order) {
      if (this.#open.has(ep.name)) continue
      const l = await this.#listenOne(ep)
      if (l === null) continue
      this.#open.set(ep.name, l)
      if (ep.port === 0) this.#eps[i] = { ...ep, port: l.port }
    }
  }

  /**
   * The port of each public listener this worker opened, by entry point name:
   * worker 0 reports them in its 'ready' message, and the supervisor gives
   * entry points on port 0 the ports it got (core/control/bound-ports.ts).
   */
  ports (): Record<string, number> {
    return Object.fromEntries([...this.#open].map(([name, l]) => [name, l.port]))
  }

  /** Serves these ACME certificates and tls-alpn-01 challenges from now on (core/acme/manager.ts); resolves once new handshakes get them. */
  setAcme (certs: readonly AcmeCert[], alpn: Readonly<Record<string, AcmeAlpnChallenge>>): Promise<void> {
    this.#acme = certs
    this.#alpn = alpn
    for (const l of this.#nodes.values()) l.setChallenges(alpn)
    this.#term.setChallenges(alpn, this.#eps)
    return this.refreshTls()
  }

  /** null: the entry point is not hosted by this worker. */
  async #listenOne (ep: EntryPointConf): Promise<Listener | null> {
    const address = `${ep.host}:${ep.port}`
    const failed = (): never => { throw lbError('LB_ERR_LISTEN', { address, entrypoint: ep.name }) }
    const index = this.#eps.indexOf(ep)
    if (!this.#isWeb(ep)) {
      if (this.#worker !== 0) return null
      const l = ep.protocol === 'tcp'
        ? new TcpListener(ep, this.#dp, this.#conns(index))
        : ep.protocol === 'h2c' ? new H2cListener(ep, this.#handler, this.#conns(index), () => this.#dp().conf.timeouts.clientMs, this.#log) : this.#term.terminator(ep.name)!
      if (!(await l.listen())) failed()
      return l
    }
    if (ep.engine === 'node' && !NODE_REUSE_PORT && this.#worker !== 0) return null // one listener per address (Node < 22.12)
    let tls = null
    let print = ''
    const acme = acmeKey(ep, this.#acme)
    if (ep.protocol === 'https') {
      tls = withAcme(ep, this.#acme)
      try {
        print = tlsFingerprint(tls) // read before uWS reads the files: a change in between is seen next time
      } catch (err) {
        throw tlsError(ep, err)
      }
    }
    let l: Listener | null
    try {
      if (ep.engine === 'node') {
        const node = await listenNode(ep.host, ep.port, this.#handler,
          { entrypoint: ep.name, tls, wsMaxMessage: ep.wsMaxMessage, conns: this.#conns(index), sent: this.#sent(index) })
        if (node !== null) {
          node.setChallenges(this.#alpn)
          this.#nodes.set(ep.name, node)
        }
        l = node
      } else {
        l = await listenHttp(this.#uws, ep.host, ep.port, ep.name, ep.protocol === 'https' ? 'https' : 'http', this.#handler,
          { ...PLAIN, tls, wsMaxMessage: ep.wsMaxMessage, conns: this.#conns(index), sent: this.#sent(index) })
      }
    } catch (err) {
      throw tlsError(ep, err) // uWS: "App construction failed"
    }
    if (l === null) failed()
    if (print !== '') this.#prints.set(ep.name, print)
    this.#acmeKeys.set(ep.name, acme)
    return l
  }

  /** Closes the public listeners (drain); established connections carry on. */
  unlisten (): void {
    this.#listening = false
    for (const l of this.#open.values()) l.close()
    this.#open.clear()
  }

  /**
   * Re-reads the TLS files of every https entry point and serves the new
   * certificates where they changed. Never throws: unusable files are logged
   * (LB_ERR_TLS) and the entry point keeps serving what it had.
   */
  refreshTls (): Promise<void> {
    this.#refreshing = this.#refreshing.then(() => this.#refresh())
    return this.#refreshing
  }

  async #refresh (): Promise<void> {
    for (const [i, ep] of this.#eps.entries()) {
      if (ep.protocol !== 'https') continue
      // a terminated entry point's certificates live in worker 0's terminator, and in every worker's app that
      // serves the connections it hands on; the other workers only listen on a unix socket
      if (this.#term.is(ep) && this.#worker !== 0 && !this.#term.handsOff(ep)) continue
      try {
        const print = tlsFingerprint(ep.tls!)
        // the files changed, or the ACME certificates (acme-sni.ts; never on mTLS entry points: lb check refuses them)
        const acme = acmeKey(ep, this.#acme)
        if (print === this.#prints.get(ep.name) && acme === (this.#acmeKeys.get(ep.name) ?? '')) continue
        const node = this.#nodes.get(ep.name)
        if (this.#term.is(ep) || node !== undefined) {
          // new connections get the new certificates; those established keep theirs
          if (node !== undefined) node.refresh(withAcme(ep, this.#acme))
          else await this.#term.renew(ep, i, this.#acme)
          this.#acmeKeys.set(ep.name, acme)
        } else if (ep.engine === 'node') {
          continue // hosted by worker 0 alone (Node < 22.12)
        } else if (this.#listening) { // a new app for new connections; those established stay on the old one
          const old = this.#open.get(ep.name)
          // the new app joins the old one's SO_REUSEPORT group before the old listen socket closes
          const l = await this.#listenOne(ep)
          if (l === null) continue
          this.#open.set(ep.name, l)
          // one turn of the loop first: the old socket accepts what queued while this worker built the new app (it
          // would be reset at close; listener-swap.ts). Measured: a third fewer resets with tcp_migrate_req 0.
          await new Promise((resolve) => setImmediate(resolve))
          old?.close()
        }
        this.#prints.set(ep.name, print)
        this.#log.info('TLS certificates reloaded', { entrypoint: ep.name })
      } catch (err) {
        const e = (err as { code?: string }).code === 'LB_ERR_TLS' ? err as Error : tlsError(ep, err)
        this.#log.error(e.message + '; the entry point keeps its current certificates', { code: 'LB_ERR_TLS' })
      }
    }
  }

  /**
   * Traffic this worker carries besides its own requests (those are counted
   * in G_WRITING): TCP sessions, and terminated TLS connections while any worker still
   * has requests in flight (an idle one may be cut).
   */
  busy (): boolean {
    if (openSessions() > 0) return true
    if (openTerminated() === 0) return false
    for (let w = 0; w < this.#workers; w++) if (this.#shm.f64[stripeBase(w) + G_WRITING]! > 0) return true
    return false
  }
}
