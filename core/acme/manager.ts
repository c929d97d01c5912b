// The ACME certificates of every router with tls.cert_resolver, in the control
// plane: one certificate per resolver and set of names (a router's Host()
// names, then its `domains`; routers with the same names share one). At start
// and on every reload (update) each wanted certificate is taken from the
// resolver's storage when it is there and not expired, else ordered; each is
// renewed from its renewal time on (renew_before, or min(30 days, a third of
// its lifetime)). A failed order is logged (LB_ERR_ACME) and retried with
// back-off, 1 s doubling to 1 h; meanwhile its hosts get the entry point's
// default certificate, or keep the one being renewed.
//
// Workers learn what to serve through the supervisor (protocol.ts AcmeState):
// the certificate files written under global.state_dir/acme (uWS loads
// certificates from files) and the http-01 answers and tls-alpn-01
// certificates of orders in progress. A
// challenge is handed to the CA only once every worker serves its answer.
// Orders run one at a time, all resolvers together.
import { createHash } from 'node:crypto'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { AcmeResolverConf } from '../config/acme.js'
import { routerDomains } from '../config/router-tls.js'
import type { Config } from '../config/load.js'
import { writeFileAtomic } from '../atomic-file.js'
import { lbError } from '../errors.js'
import type { Logger } from '../log.js'
import type { AcmeAlpnChallenge, AcmeCert, AcmeChallenge, AcmeState } from '../protocol.js'
import { type ChallengeSink, newKey, order, configureAcmeClient } from './order.js'
import { type CertInfo, type Store, type StoredCert, certInfo, readStore, writeStore } from './store.js'

const RETRY_MIN_MS = 1_000
const RETRY_MAX_MS = 3_600_000
const DAY_MS = 86_400_000
/** setTimeout's limit is 2^31-1 ms (24.8 days): longer waits are re-armed in steps of this */
const TIMER_STEP_MS = DAY_MS

/** What the dashboard API shows of one certificate. */
export interface CertificateStatus {
  readonly resolver: string
  readonly domains: readonly string[]
  readonly entrypoints: readonly string[]
  /** valid: served; renewing: served, its renewal is due; pending: none yet, ordering; failing: none, the last order failed */
  readonly status: 'valid' | 'renewing' | 'pending' | 'failing'
  readonly issuer: string
  readonly serial: string
  /** ISO 8601, '' without a certificate */
  readonly notBefore: string
  readonly notAfter: string
  readonly renewAt: string
  /** failed orders in a row */
  readonly failures: number
  readonly lastError: string
  /** ISO 8601 of the next order, '' when none is planned before renewAt */
  readonly nextAttempt: string
}

/** Orders per resolver and outcome, for /metrics. */
export interface OrderCounts { readonly success: number, readonly failure: number }

interface Entry {
  readonly id: string
  readonly resolver: AcmeResolverConf
  readonly domains: readonly string[]
  entrypoints: string[]
  cert: StoredCert | null
  info: CertInfo | null
  failures: number
  lastError: string
  /** when the next order is due, ms since the epoch (Infinity: not planned) */
  dueAt: number
  timer: NodeJS.Timeout | null
  /** this entry no longer wanted: an order in flight for it is dropped */
  dropped: boolean
  /** the files workers load it from ('' without a certificate); named by serial, never rewritten in place */
  files: { cert: string, key: string }
}

interface Resolver {
  readonly conf: AcmeResolverConf
  store: Store
  readonly counts: { success: number, failure: number }
}

/** When to renew: `renew_before` before expiry, by default min(30 days, a third of the lifetime); never in the first tenth of it. */
export function renewAt (info: CertInfo, renewBeforeMs: number): number {
  const life = info.notAfter - info.notBefore
  const window = renewBeforeMs > 0 ? renewBeforeMs : Math.min(30 * DAY_MS, life / 3)
  return Math.max(info.notAfter - window, info.notBefore + life / 10)
}

function removeFiles (f: { cert: string, key: string }): void {
  for (const p of [f.cert, f.key]) if (p !== '') rmSync(p, { force: true })
}

const iso = (ms: number): string => (Number.isFinite(ms) ? new Date(ms).toISOString() : '')

export class AcmeManager {
  readonly #log: Logger
  readonly #publish: (state: AcmeState) => Promise<void>
  readonly #dir: string
  readonly #resolvers = new Map<string, Resolver>()
  readonly #entries = new Map<string, Entry>()
  readonly #tokens = new Map<string, AcmeChallenge>()
  /** host → tls-alpn-01 challenge */
  readonly #alpn = new Map<string, AcmeAlpnChallenge>()
  #queue: Promise<void> = Promise.resolve()
  #closed = false
  /** orders wait for begin(): the workers must run to answer their challenges */
  #ordering = false

  /** `publish` hands workers what to serve and resolves once they do (Supervisor.publishAcme). */
  constructor (config: Config, log: Logger, publish: (state: AcmeState) => Promise<void>) {
    this.#log = log.child({ component: 'acme' })
    this.#publish = publish
    this.#dir = join(config.global.stateDir, 'acme')
    // files of an earlier run: workers load none yet (they start with no ACME state), the storage has them all
    rmSync(this.#dir, { recursive: true, force: true })
    configureAcmeClient(config.certificatesResolvers.map((r) => r.caCertificate))
    for (const conf of config.certificatesResolvers) {
      const { store, error } = readStore(conf.name, conf.storage, conf.caServer)
      if (error !== null) this.#log.error(error, { code: 'LB_ERR_ACME_STORAGE' })
      this.#resolvers.set(conf.name, { conf, store, counts: { success: 0, failure: 0 } })
    }
  }

  /** Takes the routers of a (new) configuration: starts what is new, forgets what is gone. Resolvers are static. */
  update (config: Config): Promise<void> {
    if (this.#resolvers.size === 0) return Promise.resolve() // no ACME: workers keep their empty state, no message
    const wanted = new Map<string, { resolver: Resolver, domains: string[], entrypoints: Set<string> }>()
    const https = new Set(config.entrypoints.filter((e) => e.protocol === 'https').map((e) => e.name))
    for (const r of config.routers) {
      const resolver = r.tls === null ? undefined : this.#resolvers.get(r.tls.certResolver)
      if (resolver === undefined) continue // no tls, or a resolver added by a reload: needs a restart (warned)
      const domains = routerDomains(r)
      const id = `${resolver.conf.name}\0${domains.join(',')}`
      const w = wanted.get(id) ?? { resolver, domains, entrypoints: new Set<string>() }
      for (const e of r.entrypoints) if (https.has(e)) w.entrypoints.add(e)
      wanted.set(id, w)
    }
    for (const [id, e] of this.#entries) {
      if (wanted.has(id)) continue
      e.dropped = true
      if (e.timer !== null) clearTimeout(e.timer)
      this.#entries.delete(id)
      removeFiles(e.files)
    }
    for (const [id, w] of wanted) {
      const old = this.#entries.get(id)
      if (old !== undefined) {
        old.entrypoints = [...w.entrypoints].sort()
        continue
      }
      const e: Entry = { id, resolver: w.resolver.conf, domains: w.domains, entrypoints: [...w.entrypoints].sort(), cert: null, info: null, failures: 0, lastError: '', dueAt: Date.now(), timer: null, dropped: false, files: { cert: '', key: '' } }
      this.#entries.set(id, e)
      const stored = this.#stored(w.resolver.store, w.domains)
      if (stored !== null) this.#install(e, stored)
      this.#plan(e)
    }
    return this.#send()
  }

  /** The stored certificate for exactly these names, unless it has expired (or cannot be read). */
  #stored (store: Store, domains: readonly string[]): StoredCert | null {
    const same = (c: StoredCert): boolean => c.domains.length === domains.length && c.domains.every((d, i) => d === domains[i])
    const c = store.certificates.find(same)
    if (c === undefined) return null
    try {
      return certInfo(c.cert).notAfter > Date.now() ? c : null
    } catch {
      return null
    }
  }

  /**
   * Serves `cert` for the entry from the next publish on; its renewal is
   * planned from it. Returns the files of the certificate it replaces, to
   * remove once workers no longer load them. Each certificate has its own
   * files (named by serial): a worker never reads a new key with an old chain.
   */
  #install (e: Entry, cert: StoredCert): { cert: string, key: string } {
    const info = certInfo(cert.cert)
    const base = join(this.#dir, `${e.resolver.name}-${createHash('sha256').update(e.id).digest('hex').slice(0, 16)}-${info.serial}`)
    const files = { cert: `${base}.crt`, key: `${base}.key` }
    writeFileAtomic(files.key, cert.key)
    try {
      writeFileAtomic(files.cert, cert.cert)
    } catch (err) {
      if (files.key !== e.files.key) rmSync(files.key, { force: true }) // no key file without its certificate
      throw err
    }
    const old = e.files
    e.files = files
    e.cert = cert
    e.info = info
    e.dueAt = renewAt(info, e.resolver.renewBeforeMs)
    return old
  }

  /** Arms the entry's timer for dueAt (in steps: setTimeout cannot wait 25 days or more). */
  #plan (e: Entry): void {
    if (e.timer !== null) clearTimeout(e.timer)
    e.timer = null
    if (this.#closed || e.dropped || !this.#ordering) return
    const wait = Math.max(0, e.dueAt - Date.now())
    e.timer = setTimeout(() => {
      e.timer = null
      if (Date.now() < e.dueAt) this.#plan(e)
      else this.#enqueue(e)
    }, Math.min(wait, TIMER_STEP_MS))
    e.timer.unref()
  }

  #enqueue (e: Entry): void {
    this.#queue = this.#queue.then(() => this.#order(e))
  }

  async #order (e: Entry): Promise<void> {
    if (this.#closed || e.dropped) return
    const r = this.#resolvers.get(e.resolver.name)!
    const renewal = e.cert !== null
    // obtained by an earlier try whose files could not be written (a full disk): installed now, not ordered again
    const held = this.#stored(r.store, e.domains)
    const install = held !== null && held !== e.cert && r.store.account !== null
    this.#log.info(install ? 'writing the certificate obtained before' : renewal ? 'renewing certificate' : 'ordering certificate', { resolver: r.conf.name, domains: e.domains })
    try {
      let got: Awaited<ReturnType<typeof order>>
      if (install) {
        got = { account: r.store.account!, cert: held! }
      } else {
        // a new account's key is kept even when the order fails, so retries do not make more accounts
        const account = r.store.account ?? { key: await newKey('EC256'), url: '' }
        r.store = { ...r.store, account }
        got = await order(r.conf, account, e.domains, this.#sink(r.conf))
      }
      if (this.#closed) return
      const others = r.store.certificates.filter((c) => c.domains.join(',') !== got.cert.domains.join(','))
      r.store = { caServer: r.conf.caServer, account: got.account, certificates: [...others, got.cert] }
      writeStore(r.conf.storage, r.store)
      r.counts.success++
      if (e.dropped) return
      const replaced = this.#install(e, got.cert)
      e.failures = 0
      e.lastError = ''
      await this.#send()
      removeFiles(replaced)
      // logged once every worker serves it
      this.#log.info(renewal ? 'certificate renewed' : 'certificate obtained', {
        resolver: r.conf.name, domains: e.domains, serial: e.info!.serial, not_after: iso(e.info!.notAfter), renew_at: iso(e.dueAt),
      })
    } catch (err) {
      if (this.#closed) return
      r.counts.failure++
      e.failures++
      const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** Math.min(e.failures - 1, 30))
      e.lastError = (err as Error).message
      e.dueAt = Date.now() + delay
      const msg = lbError('LB_ERR_ACME', { resolver: r.conf.name, domains: e.domains.join(', '), reason: e.lastError, retry: `${delay / 1000}s` }).message
      this.#log.error(msg, { code: 'LB_ERR_ACME', failures: e.failures })
    }
    this.#plan(e)
  }

  #sink (conf: AcmeResolverConf): ChallengeSink {
    return {
      add: async (a) => {
        if (a.type === 'http-01') this.#tokens.set(a.token, { entrypoint: conf.httpEntrypoint, keyAuthorization: a.keyAuthorization })
        else this.#alpn.set(a.host, { entrypoint: conf.tlsEntrypoint, cert: a.cert, key: a.key })
        await this.#send()
      },
      remove: async (a) => {
        if (a.type === 'http-01') this.#tokens.delete(a.token)
        else this.#alpn.delete(a.host)
        await this.#send()
      },
    }
  }

  /** What workers serve now. */
  state (): AcmeState {
    const certs: AcmeCert[] = []
    for (const e of this.#entries.values()) {
      if (e.cert === null || e.entrypoints.length === 0) continue
      certs.push({ hosts: e.domains, entrypoints: e.entrypoints, cert: e.files.cert, key: e.files.key, version: e.info!.serial })
    }
    return { certs, tokens: Object.fromEntries(this.#tokens), alpn: Object.fromEntries(this.#alpn) }
  }

  #send (): Promise<void> {
    return this.#closed ? Promise.resolve() : this.#publish(this.state())
  }

  status (): CertificateStatus[] {
    const now = Date.now()
    return [...this.#entries.values()].map((e): CertificateStatus => {
      const valid = e.info !== null && e.info.notAfter > now
      const status = !valid ? (e.failures > 0 ? 'failing' : 'pending') : now >= renewAt(e.info!, e.resolver.renewBeforeMs) ? 'renewing' : 'valid'
      return {
        resolver: e.resolver.name,
        domains: e.domains,
        entrypoints: e.entrypoints,
        status,
        issuer: e.info?.issuer ?? '',
        serial: e.info?.serial ?? '',
        notBefore: iso(e.info?.notBefore ?? NaN),
        notAfter: iso(e.info?.notAfter ?? NaN),
        renewAt: e.info === null ? '' : iso(renewAt(e.info, e.resolver.renewBeforeMs)),
        failures: e.failures,
        lastError: e.lastError,
        nextAttempt: iso(e.dueAt),
      }
    }).sort((a, b) => (a.resolver + a.domains.join(',') < b.resolver + b.domains.join(',') ? -1 : 1))
  }

  counts (): ReadonlyMap<string, OrderCounts> {
    return new Map([...this.#resolvers].map(([name, r]) => [name, { ...r.counts }]))
  }

  /**
   * Orders and renews from now on (once the workers run). Until then update() only takes certificates from
   * storage, so that the workers start with them: served from the first connection, no listener swapped later.
   */
  begin (): void {
    this.#ordering = true
    for (const e of this.#entries.values()) this.#plan(e)
  }

  /** Stops planning orders; one in flight is abandoned (its result is not stored). */
  close (): void {
    this.#closed = true
    for (const e of this.#entries.values()) if (e.timer !== null) clearTimeout(e.timer)
  }
}
