// Every entry point of one data-plane worker, and what listening means for
// each protocol:
// - http, https: a uWS app per entry point in every worker, all on the same
//   address (SO_REUSEPORT: the kernel spreads connections), each with a
//   WebSocket route next to its HTTP route.
// - https with tls.ca (mTLS), or named by a resolver's tls_challenge
//   (tls-alpn-01): the TLS handshake runs on node:tls in worker 0
//   (tls-terminator.ts says why uWS cannot do it), which hands the decrypted
//   connections to a plain uWS app that every worker listens with on a unix
//   socket in global.state_dir.
// - https with http2.enabled: terminated in worker 0 as above; ALPN picks h2
//   (served in worker 0 by transport/h2/h2.ts) or http/1.1 (handed to a worker's uWS app).
//   Without mTLS, a client that offers no h2 skips node:tls: its connection
//   goes, unread, to an app every worker keeps for the entry point that
//   listens on nothing (tls-terminator.ts, core/shm/fd-handoff.ts).
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
import { chmodSync, closeSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { isTerminated, tlsChallengeEntrypoints } from '../config/acme.js'
import type { EntryPointConf } from '../config/static.js'
import { tlsFingerprint } from '../config/tls.js'
import { lbError } from '../errors.js'
import { UNIX_PATH_MAX } from '../net/listen.js'
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
import { TlsTerminator, openTerminated } from './tls/tls-terminator.js'
import { acmeKey, withAcme } from './tls/acme-sni.js'
import { H2cListener } from './transport/h2/h2c.js'
import { FdSender, receiveFds } from '../shm/fd-handoff.js'
import { fdCalls } from '../net/fd-peek.js'

function tlsError (ep: EntryPointConf, err: unknown): Error {
  const reason = (err as Error).message.replace(/^error:[0-9A-F]+:/, '')
  return lbError('LB_ERR_TLS', { entrypoint: ep.name, reason })
}

export class EntryPoints {
  readonly #uws: Uws
  /** an entry point on port 0 is replaced by one with the port it got, so a re-listen (new certificates) keeps that port */
  readonly #eps: EntryPointConf[]
  readonly #worker: number
  readonly #workers: number
  readonly #stateDir: string
  readonly #shm: Shm
  readonly #handler: RequestHandler
  readonly #dp: () => DataPlane
  readonly #log: Logger
  /** this worker's client connections, every entry point's (global.max_connections) */
  readonly #conns: Connections
  /** what unlisten() closes, by entry point name */
  readonly #open = new Map<string, Listener>()
  /** fingerprint of the TLS files each https entry point serves now */
  readonly #prints = new Map<string, string>()
  readonly #terminators = new Map<string, TlsTerminator>()
  /** the apps that serve the connections a terminator hands on (#handsOff), by entry point number */
  readonly #adopters = new Map<number, Listener>()
  /** this worker's node engine listeners (transport/node/engine.ts), by entry point name */
  readonly #nodes = new Map<string, NodeListener>()
  /** ACME certificates served by SNI (acme-sni.ts) on the uWS https listeners, and what each serves of them */
  #acme: readonly AcmeCert[]
  readonly #acmeKeys = new Map<string, string>()
  /** tls-alpn-01 challenges pending (worker 0's terminators answer them) */
  #alpn: Readonly<Record<string, AcmeAlpnChallenge>>
  /** https entry points that tls_challenge names: terminated in node:tls like mTLS ones */
  readonly #alpnEps: ReadonlySet<string>
  #listening = false
  #refreshing: Promise<void> = Promise.resolve()

  /** `dp` returns the data plane generation in force. */
  constructor (uws: Uws, data: WorkerData, shm: Shm, handler: RequestHandler, dp: () => DataPlane, log: Logger) {
    this.#uws = uws
    this.#eps = [...data.config.entrypoints]
    this.#worker = data.index
    this.#workers = data.workers
    this.#stateDir = data.config.global.stateDir
    this.#shm = shm
    this.#handler = handler
    this.#dp = dp
    this.#log = log
    this.#conns = new Connections(shm, data.index, data.config.global.maxConnections)
    this.#acme = data.acme.certs
    this.#alpn = data.acme.alpn
    this.#alpnEps = tlsChallengeEntrypoints(data.config.certificatesResolvers)
  }

  /** Whether node:tls in worker 0 terminates the entry point's TLS (mTLS, or tls-alpn-01) rather than uWS. */
  #terminated (ep: EntryPointConf): boolean {
    return isTerminated(ep, this.#alpnEps) // false for the node engine: node:https is its own TLS
  }

  /** Whether worker 0's terminator hands some of the entry point's connections to the workers' uWS apps (tls-terminator.ts). */
  #handsOff (ep: EntryPointConf): boolean {
    return this.#terminated(ep) && ep.tls!.ca === '' && fdCalls !== null
  }

  /** An app that listens on nothing and serves the connections handed to it, with the entry point's certificates. */
  async #adopter (ep: EntryPointConf, i: number): Promise<Listener> {
    const l = await listenHttp(this.#uws, '', 0, ep.name, 'https', this.#handler,
      { ...PLAIN, tls: withAcme(ep, this.#acme), adoptOnly: true, wsMaxMessage: ep.wsMaxMessage, conns: this.#conns, sent: this.#sent(i) })
    return l!
  }

  /** Serves `fd`, a connection of entry point number `ep`; false when this worker has no app for it (the caller keeps it). */
  #adopt (ep: number, fd: number): boolean {
    const a = this.#adopters.get(ep)
    if (a === undefined) return false
    a.adopt!(fd)
    return true
  }

  /** Whether the entry point is a web one with its own listener in every worker (uWS, or the node engine), not one of worker 0's node:net servers (tcp, h2c) or node:tls terminators. */
  #isWeb (ep: EntryPointConf): boolean {
    return ep.protocol !== 'tcp' && ep.protocol !== 'h2c' && !this.#terminated(ep)
  }

  /** The counter of bytes sent beyond bodies to the clients of entry point number `ep` (its row in this worker's stripe). */
  #sent (ep: number): SentBytes {
    return new SentBytes(this.#shm, this.#worker, ep)
  }

  /** Unix socket on which `worker` takes the connections of terminated entry point number `ep`. */
  socketPath (ep: number, worker: number): string {
    return join(this.#stateDir, `mtls-${ep}-${worker}.sock`)
  }

  /** Internal listeners, the terminators' certificates, then the public listeners. Throws LB_ERR_LISTEN or LB_ERR_TLS. */
  async start (): Promise<void> {
    let sender: FdSender | null = null
    if (this.#eps.some((ep) => this.#handsOff(ep))) {
      const i32 = this.#shm.i32
      receiveFds(i32, this.#worker, (ep, fd) => { if (!this.#adopt(ep, fd)) closeSync(fd) })
      if (this.#worker === 0) sender = new FdSender(i32, 0, this.#workers, (ep, fd) => this.#adopt(ep, fd))
    }
    for (const [i, ep] of this.#eps.entries()) {
      if (!this.#terminated(ep)) continue
      if (this.#handsOff(ep)) {
        try {
          this.#prints.set(ep.name, tlsFingerprint(ep.tls!)) // read before uWS reads the files, as in #listenOne
          this.#acmeKeys.set(ep.name, acmeKey(ep, this.#acme))
          this.#adopters.set(i, await this.#adopter(ep, i))
        } catch (err) {
          throw tlsError(ep, err)
        }
      }
      const path = this.socketPath(i, this.#worker)
      if (path.length > UNIX_PATH_MAX) throw lbError('LB_ERR_LISTEN', { address: `unix:${path} (longer than ${UNIX_PATH_MAX} bytes: shorten global.state_dir)`, entrypoint: ep.name })
      rmSync(path, { force: true }) // left by a previous run of this worker
      const l = await listenHttp(this.#uws, '', 0, ep.name, 'https', this.#handler, { ...PLAIN, unixPath: path, proxied: true, wsMaxMessage: ep.wsMaxMessage, conns: this.#conns, sent: this.#sent(i) })
      if (l === null) throw lbError('LB_ERR_LISTEN', { address: `unix:${path}`, entrypoint: ep.name })
      // whoever can connect here skips the client-certificate check and names its own client address
      // (PROXY header): owner only, whatever the umask
      chmodSync(path, 0o600)
      process.on('exit', () => rmSync(path, { force: true })) // a worker thread's exit: leave no socket file behind
      if (this.#worker === 0) {
        try {
          this.#prints.set(ep.name, tlsFingerprint(ep.tls!))
          const workers = this.#workers
          const h2 = ep.http2.enabled ? { handler: this.#handler, conns: this.#conns, log: this.#log } : null
          const t = new TlsTerminator(ep, withAcme(ep, this.#acme), workers, (w) => this.socketPath(i, w), () => this.#dp().conf.timeouts.clientMs, h2,
            sender !== null && this.#handsOff(ep) ? (fd) => sender.give(i, fd) : null)
          t.setChallenges(this.#alpn)
          this.#terminators.set(ep.name, t)
          this.#acmeKeys.set(ep.name, acmeKey(ep, this.#acme))
        } catch (err) {
          throw tlsError(ep, err)
        }
      }
    }
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
    for (const [name, t] of this.#terminators) {
      try {
        t.setChallenges(alpn)
      } catch (err) {
        this.#log.error(tlsError(this.#eps.find((e) => e.name === name)!, err).message + ' (a tls-alpn-01 challenge certificate)', { code: 'LB_ERR_TLS' })
      }
    }
    return this.refreshTls()
  }

  /** null: the entry point is not hosted by this worker. */
  async #listenOne (ep: EntryPointConf): Promise<Listener | null> {
    const address = `${ep.host}:${ep.port}`
    const failed = (): never => { throw lbError('LB_ERR_LISTEN', { address, entrypoint: ep.name }) }
    if (!this.#isWeb(ep)) {
      if (this.#worker !== 0) return null
      const l = ep.protocol === 'tcp'
        ? new TcpListener(ep, this.#dp, this.#conns)
        : ep.protocol === 'h2c' ? new H2cListener(ep, this.#handler, this.#conns, () => this.#dp().conf.timeouts.clientMs, this.#log) : this.#terminators.get(ep.name)!
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
          { entrypoint: ep.name, tls, wsMaxMessage: ep.wsMaxMessage, conns: this.#conns, sent: this.#sent(this.#eps.indexOf(ep)) })
        if (node !== null) {
          node.setChallenges(this.#alpn)
          this.#nodes.set(ep.name, node)
        }
        l = node
      } else {
        l = await listenHttp(this.#uws, ep.host, ep.port, ep.name, ep.protocol === 'https' ? 'https' : 'http', this.#handler,
          { ...PLAIN, tls, wsMaxMessage: ep.wsMaxMessage, conns: this.#conns, sent: this.#sent(this.#eps.indexOf(ep)) })
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
      if (this.#terminated(ep) && this.#worker !== 0 && !this.#handsOff(ep)) continue
      try {
        const print = tlsFingerprint(ep.tls!)
        // the files changed, or the ACME certificates (acme-sni.ts; never on mTLS entry points: lb check refuses them)
        const acme = acmeKey(ep, this.#acme)
        if (print === this.#prints.get(ep.name) && acme === (this.#acmeKeys.get(ep.name) ?? '')) continue
        // a new app for new connections; those established stay on the old one
        if (this.#handsOff(ep)) this.#adopters.set(i, await this.#adopter(ep, i))
        const terminator = this.#terminators.get(ep.name) ?? this.#nodes.get(ep.name)
        if (terminator !== undefined || this.#terminated(ep)) {
          terminator?.refresh(withAcme(ep, this.#acme)) // worker 0; the others have only the app above
          this.#acmeKeys.set(ep.name, acme)
        } else if (ep.engine === 'node') {
          continue // hosted by worker 0 alone (Node < 22.12)
        } else if (this.#listening) { // in worker 0 every terminated entry point has a terminator (start())
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
