// The https entry points whose TLS worker 0 terminates in node:tls rather than
// uWS (tls-terminator.ts says why uWS cannot): those with tls.ca (mTLS), those
// a resolver's tls_challenge names (tls-alpn-01), and those with http2.enabled.
// Worker 0 holds their terminators; every worker serves the decrypted
// connections on a plain uWS app listening on a unix socket in
// global.state_dir. Without mTLS, a client that offers no h2 skips node:tls:
// its connection goes, unread, to an app every worker keeps for the entry
// point that listens on nothing (an adopter; core/shm/fd-handoff.ts).
import { chmodSync, closeSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { isTerminated } from '../../config/acme.js'
import type { EntryPointConf } from '../../config/static.js'
import { tlsFingerprint } from '../../config/tls.js'
import { lbError } from '../../errors.js'
import type { Logger } from '../../log.js'
import { fdCalls } from '../../net/fd-peek.js'
import { UNIX_PATH_MAX } from '../../net/listen.js'
import type { AcmeAlpnChallenge, AcmeCert } from '../../protocol.js'
import { FdSender, receiveFds } from '../../shm/fd-handoff.js'
import type { Shm } from '../../shm/layout.js'
import type { Connections } from '../connections.js'
import { type Listener, type RequestHandler, PLAIN } from '../transport/listen-options.js'
import type { SentBytes } from '../transport/sent-bytes.js'
import { listenHttp } from '../transport/uws/app.js'
import type { Uws } from '../transport/uws/native.js'
import { acmeKey, withAcme } from './acme-sni.js'
import { TlsTerminator } from './tls-terminator.js'

/** What the terminated entry points of one worker need of it (listeners.ts gives its own). */
export interface TerminatedHost {
  readonly uws: Uws
  readonly worker: number
  readonly workers: number
  readonly stateDir: string
  readonly shm: Shm
  readonly handler: RequestHandler
  /** the counter of the client connections of entry point number `ep` */
  conns (ep: number): Connections
  readonly log: Logger
  /** the counter of bytes sent to the clients of entry point number `ep` */
  sent (ep: number): SentBytes
  /** timeouts.client of the generation in force (ms): a TLS handshake's limit */
  clientMs (): number
  /** the fingerprint of the TLS files, and the ACME certificates' key, each entry point serves now (compared on refresh) */
  readonly prints: Map<string, string>
  readonly acmeKeys: Map<string, string>
}

export function tlsError (ep: EntryPointConf, err: unknown): Error {
  const reason = (err as Error).message.replace(/^error:[0-9A-F]+:/, '')
  return lbError('LB_ERR_TLS', { entrypoint: ep.name, reason })
}

export class Terminated {
  readonly #host: TerminatedHost
  /** https entry points that tls_challenge names: terminated in node:tls like mTLS ones */
  readonly #alpnEps: ReadonlySet<string>
  /** worker 0's terminators, by entry point name */
  readonly #terminators = new Map<string, TlsTerminator>()
  /** the apps that serve the connections a terminator hands on (handsOff), by entry point number */
  readonly #adopters = new Map<number, Listener>()

  constructor (host: TerminatedHost, alpnEps: ReadonlySet<string>) {
    this.#host = host
    this.#alpnEps = alpnEps
  }

  /** Whether node:tls in worker 0 terminates the entry point's TLS (mTLS, or tls-alpn-01) rather than uWS. */
  is (ep: EntryPointConf): boolean {
    return isTerminated(ep, this.#alpnEps) // false for the node engine: node:https is its own TLS
  }

  /** Whether worker 0's terminator hands some of the entry point's connections to the workers' uWS apps (tls-terminator.ts). */
  handsOff (ep: EntryPointConf): boolean {
    return this.is(ep) && ep.tls!.ca === '' && fdCalls !== null
  }

  /** Worker 0's terminator of the entry point (its public listener). */
  terminator (name: string): TlsTerminator | undefined {
    return this.#terminators.get(name)
  }

  /** Unix socket on which `worker` takes the connections of terminated entry point number `ep`. */
  socketPath (ep: number, worker: number): string {
    return join(this.#host.stateDir, `mtls-${ep}-${worker}.sock`)
  }

  /** An app that listens on nothing and serves the connections handed to it, with the entry point's certificates. */
  async #adopter (ep: EntryPointConf, i: number, acme: readonly AcmeCert[]): Promise<Listener> {
    const h = this.#host
    const l = await listenHttp(h.uws, '', 0, ep.name, 'https', h.handler,
      { ...PLAIN, tls: withAcme(ep, acme), adoptOnly: true, wsMaxMessage: ep.wsMaxMessage, conns: h.conns(i), sent: h.sent(i) })
    return l!
  }

  /** Serves `fd`, a connection of entry point number `ep`; false when this worker has no app for it (the caller keeps it). */
  #adopt (ep: number, fd: number): boolean {
    const a = this.#adopters.get(ep)
    if (a === undefined) return false
    a.adopt!(fd)
    return true
  }

  /** The unix listeners, adopters and (worker 0) terminators of `eps`' terminated entry points. Throws LB_ERR_LISTEN or LB_ERR_TLS. */
  async start (eps: readonly EntryPointConf[], acme: readonly AcmeCert[], alpn: Readonly<Record<string, AcmeAlpnChallenge>>): Promise<void> {
    const h = this.#host
    let sender: FdSender | null = null
    if (eps.some((ep) => this.handsOff(ep))) {
      const i32 = h.shm.i32
      receiveFds(i32, h.worker, (ep, fd) => { if (!this.#adopt(ep, fd)) closeSync(fd) })
      if (h.worker === 0) sender = new FdSender(i32, 0, h.workers, (ep, fd) => this.#adopt(ep, fd))
    }
    for (const [i, ep] of eps.entries()) {
      if (!this.is(ep)) continue
      if (this.handsOff(ep)) {
        try {
          h.prints.set(ep.name, tlsFingerprint(ep.tls!)) // read before uWS reads the files, as listeners.ts does
          h.acmeKeys.set(ep.name, acmeKey(ep, acme))
          this.#adopters.set(i, await this.#adopter(ep, i, acme))
        } catch (err) {
          throw tlsError(ep, err)
        }
      }
      const path = this.socketPath(i, h.worker)
      if (path.length > UNIX_PATH_MAX) throw lbError('LB_ERR_LISTEN', { address: `unix:${path} (longer than ${UNIX_PATH_MAX} bytes: shorten global.state_dir)`, entrypoint: ep.name })
      rmSync(path, { force: true }) // left by a previous run of this worker
      const l = await listenHttp(h.uws, '', 0, ep.name, 'https', h.handler, { ...PLAIN, unixPath: path, proxied: true, wsMaxMessage: ep.wsMaxMessage, conns: h.conns(i), sent: h.sent(i) })
      if (l === null) throw lbError('LB_ERR_LISTEN', { address: `unix:${path}`, entrypoint: ep.name })
      // whoever can connect here skips the client-certificate check and names its own client address
      // (PROXY header): owner only, whatever the umask
      chmodSync(path, 0o600)
      process.on('exit', () => rmSync(path, { force: true })) // a worker thread's exit: leave no socket file behind
      if (h.worker !== 0) continue
      try {
        h.prints.set(ep.name, tlsFingerprint(ep.tls!))
        const h2 = ep.http2.enabled ? { handler: h.handler, conns: h.conns(i), log: h.log } : null
        const give = sender !== null && this.handsOff(ep) ? (fd: number) => sender.give(i, fd) : null
        const t = new TlsTerminator(ep, withAcme(ep, acme), h.workers, (w) => this.socketPath(i, w), () => h.clientMs(), h2, give)
        t.setChallenges(alpn)
        this.#terminators.set(ep.name, t)
        h.acmeKeys.set(ep.name, acmeKey(ep, acme))
      } catch (err) {
        throw tlsError(ep, err)
      }
    }
  }

  /** Answers these tls-alpn-01 challenges from now on; a challenge certificate that cannot be used is logged. */
  setChallenges (alpn: Readonly<Record<string, AcmeAlpnChallenge>>, eps: readonly EntryPointConf[]): void {
    for (const [name, t] of this.#terminators) {
      try {
        t.setChallenges(alpn)
      } catch (err) {
        this.#host.log.error(tlsError(eps.find((e) => e.name === name)!, err).message + ' (a tls-alpn-01 challenge certificate)', { code: 'LB_ERR_TLS' })
      }
    }
  }

  /**
   * Serves the entry point's new certificates (files or ACME) to new connections: a new adopter (established
   * connections stay on the old one) and, in worker 0, the terminator's new secure context. Throws on unusable files.
   */
  async renew (ep: EntryPointConf, i: number, acme: readonly AcmeCert[]): Promise<void> {
    if (this.handsOff(ep)) this.#adopters.set(i, await this.#adopter(ep, i, acme))
    this.#terminators.get(ep.name)?.refresh(withAcme(ep, acme)) // worker 0; the others have only the adopter
  }
}
