// Starts the data-plane worker threads, restarts one that dies (with back-off,
// so a worker that crashes at start does not spin), and broadcasts config
// generations. Workers share all state through shared memory; messages are
// only for configuration and lifecycle.
import { randomBytes } from 'node:crypto'
import { Worker } from 'node:worker_threads'
import type { Config } from '../config/load.js'
import type { Logger } from '../log.js'
import type { PluginStatus } from '../plugin.js'
import type { EdgeAnswer, EdgeToControl, RemoteListing } from '../gen/edge/messages.js'
import { type AcmeState, type FromWorker, NO_ACME, type Slots, type ToWorker, type WorkerData } from '../protocol.js'
import { clearGauges } from '../shm/counters.js'
import type { Shm } from '../shm/layout.js'
import type { Revocation } from '../shm/revocations.js'
import { type BoundPorts, portsBound, withBoundPorts } from './bound-ports.js'

const WORKER_URL = new URL('../worker/main.js', import.meta.url)
const BACKOFF_MIN_MS = 100
const BACKOFF_MAX_MS = 10_000
const STABLE_MS = 30_000 // a worker that ran this long resets its back-off
/** a worker that has not applied an ACME state within this is not waited for (it gets the state when it restarts) */
const ACME_ACK_MS = 5_000
/**
 * a worker that has not applied a configuration within this is not waited for:
 * its loop is stuck (a plugin blocking it), and reloads and config API writes
 * behind this one must not wait with it; it applies what it was sent when free
 */
const CONFIG_ACK_MS = 10_000
const STUCK_MS = 5_000 // after drain_timeout, a worker that has not exited by itself within this is stuck
// A worker's V8 young generation, in MB: V8's starting size, which it may then
// no longer grow. Left free, V8 grows it to 32 MB of new space per worker when
// many connections stay open (each holds a few objects across scavenges), and
// the pages of the larger semi-spaces are touched one by one over the next
// hundred thousand requests: resident memory climbed by up to 50 MB for two
// workers long after a burst, with the live heap flat at 8 MB per worker
// (test/e2e/memory.test.ts). Requests per CPU-second are the same or better
// with the cap (bench/RESULTS.md, "Data plane", "What was tried").
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 12 } as const

interface Slot {
  worker: Worker | null
  startedAt: number
  backoffMs: number
}

export class Supervisor {
  readonly #shm: Shm
  readonly #log: Logger
  readonly #slots: Slot[]
  #config: Config
  #slotMap: Slots
  #generation: number
  #stopping = false
  /** requests cut at the drain deadline, summed over workers */
  #cut = 0
  /** latest middleware status by "name\0worker index" (PluginEnv.setStatus) */
  readonly #status = new Map<string, { generation: number, status: PluginStatus, message: string }>()
  readonly #pending = new Map<number, { resolve: (errors: string[]) => void, waiting: Set<number>, errors: string[] }>()
  /** what workers serve for ACME now; a (re)started worker gets it in its workerData */
  #acme: AcmeState = NO_ACME
  #acmeSeq = 0
  readonly #acmePending = new Map<number, { resolve: () => void, waiting: Set<number> }>()
  /** the ports entry points on port 0 got from worker 0 (bound-ports.ts) */
  #bound: BoundPorts = {}
  /**
   * Keeps and shares a revocation a worker's middleware added (core/control/revocations.ts); the worker
   * is answered when it settles. Set by core/main.ts; never rejects.
   */
  onRevoke: (r: Revocation) => Promise<void> = () => Promise.resolve()
  /**
   * A worker's question or news about a remote model request it relays (core/gen/edge/); `reply` answers it.
   * Set by core/main.ts to the generation service's broker; without one, every request goes the old way.
   */
  onGen: (index: number, m: EdgeToControl, reply: (id: number, a: EdgeAnswer) => void) => void = (_i, m, reply) => {
    if (m.kind !== 'end') reply(m.id, { go: 'service' })
  }

  /** A worker is gone: the requests it relayed ended with it. */
  onGenExit: (index: number) => void = () => undefined
  /** The remote servers' listing the workers relay by; a (re)started worker is sent it first */
  #genListing: RemoteListing | null = null

  /** node:tls session ticket keys, the same in every worker and every restart of one (WorkerData.ticketKeys); never logged */
  readonly #ticketKeys = randomBytes(48)

  constructor (shm: Shm, config: Config, slots: Slots, generation: number, log: Logger) {
    this.#shm = shm
    this.#config = config
    this.#slotMap = slots
    this.#generation = generation
    this.#log = log
    this.#slots = Array.from({ length: shm.workers }, () => ({ worker: null, startedAt: 0, backoffMs: BACKOFF_MIN_MS }))
  }

  /** Starts every worker; resolves when all listen, rejects with the first fatal start-up error. */
  async start (): Promise<void> {
    // Worker 0 first, alone. It binds the entry points on port 0: the others, and any worker restarted later
    // (#spawn hands out #config), listen on the ports it got. And it hosts the tcp, h2c and node:tls listeners,
    // which it opens before its web ones: so the first web listener to accept is worker 0's, when every other
    // port already does (the readiness core/main.ts promises; another worker's web listener could come first).
    const ports = await this.#spawn(0)
    if (this.#config.entrypoints.some((e) => e.port === 0)) {
      this.#bound = portsBound(this.#config.entrypoints, ports)
      this.#config = withBoundPorts(this.#config, this.#bound)
    }
    await Promise.all(this.#slots.slice(1).map((_, i) => this.#spawn(1 + i)))
  }

  /** The ports the entry points on port 0 got (empty until start() resolves, and when none is on port 0). */
  get boundPorts (): BoundPorts {
    return this.#bound
  }

  /** Resolves with the ports of the worker's listeners (by entry point name) once it listens. */
  #spawn (index: number): Promise<Readonly<Record<string, number>>> {
    const slot = this.#slots[index]!
    const data: WorkerData = { index, workers: this.#shm.workers, shm: this.#shm.buffer, generation: this.#generation, config: this.#config, slots: this.#slotMap, acme: this.#acme, ticketKeys: this.#ticketKeys }
    const w = new Worker(WORKER_URL, { workerData: data, resourceLimits: WORKER_LIMITS })
    slot.worker = w
    slot.startedAt = Date.now()
    // queued by the port until the worker listens: it has the listing before its first request
    if (this.#genListing !== null) this.#send(w, { type: 'gen-listing', listing: this.#genListing })
    return new Promise((resolve, reject) => {
      let ready = false
      w.on('message', (m: FromWorker) => {
        switch (m.type) {
          case 'ready':
            ready = true
            resolve(m.ports)
            break
          case 'fatal':
            this.#log.error('worker failed', { worker: index, error: m.message })
            if (!ready) reject(new Error(m.message))
            break
          case 'cut':
            this.#cut += m.count
            break
          case 'acme-applied':
            this.#acmeSettle(m.seq, index)
            break
          case 'revoke':
            void this.onRevoke(m.revocation).then(() => { if (slot.worker === w) this.#send(w, { type: 'revoked', seq: m.seq }) })
            break
          case 'gen':
            this.onGen(index, m.msg, (id, answer) => { if (slot.worker === w) this.#send(w, { type: 'gen-answer', id, answer }) })
            break
          case 'status':
            this.#status.set(`${m.middleware}\u0000${index}`, { generation: m.generation, status: m.status, message: m.message })
            break
          case 'applied':
          case 'rejected':
            this.#settle(m.generation, index, m.type === 'rejected' ? m.message : null)
            break
          default: {
            const never: never = m
            this.#log.error('unknown worker message', { msg: never })
          }
        }
      })
      w.on('error', (err) => this.#log.error('worker error', { worker: index, error: err.stack ?? err.message }))
      w.on('exit', (code) => {
        slot.worker = null
        clearGauges(this.#shm, index) // its requests died with it; counters stay
        this.onGenExit(index)
        for (const p of this.#pending.values()) if (p.waiting.delete(index) && p.waiting.size === 0) p.resolve(p.errors)
        for (const [seq] of this.#acmePending) this.#acmeSettle(seq, index)
        if (this.#stopping) return
        if (!ready) return // start-up failure: reported through the promise
        this.#log.error('worker exited; restarting', { worker: index, code })
        if (Date.now() - slot.startedAt > STABLE_MS) slot.backoffMs = BACKOFF_MIN_MS
        const delay = slot.backoffMs
        slot.backoffMs = Math.min(BACKOFF_MAX_MS, slot.backoffMs * 2)
        setTimeout(() => {
          if (!this.#stopping) this.#spawn(index).then(() => this.#log.info('worker restarted', { worker: index })).catch((err: Error) => this.#log.error('worker restart failed', { worker: index, error: err.message }))
        }, delay).unref()
      })
    })
  }

  #send (w: Worker, msg: ToWorker): void {
    w.postMessage(msg)
  }

  /** Hands every worker the remote servers' listing (core/gen/edge/): on every change of it. */
  publishGenListing (listing: RemoteListing): void {
    this.#genListing = listing
    for (const s of this.#slots) if (s.worker !== null) this.#send(s.worker, { type: 'gen-listing', listing })
  }

  #settle (generation: number, index: number, error: string | null): void {
    const p = this.#pending.get(generation)
    if (p === undefined) return
    if (error !== null) p.errors.push(`worker ${index}: ${error}`)
    p.waiting.delete(index)
    if (p.waiting.size === 0) {
      this.#pending.delete(generation)
      p.resolve(p.errors)
    }
  }

  /**
   * A middleware's status as its instances of the current generation reported
   * it: the worst over the workers (a warning from any one shows), or null when
   * none reported (plugins that do not use setStatus).
   */
  middlewareStatus (name: string): { status: PluginStatus, message: string } | null {
    let out: { status: PluginStatus, message: string } | null = null
    for (let i = 0; i < this.#slots.length; i++) {
      const s = this.#status.get(`${name}\u0000${i}`)
      if (s === undefined || s.generation !== this.#generation) continue
      if (out === null || (out.status === 'enabled' && s.status !== 'enabled')) out = { status: s.status, message: s.message }
    }
    return out
  }

  /** Sends a new config generation to every worker; resolves with the workers' errors (empty = applied everywhere). */
  broadcast (config: Config, slots: Slots, generation: number): Promise<string[]> {
    this.#config = config
    this.#slotMap = slots
    this.#generation = generation
    const live = this.#slots.map((s, i) => [s.worker, i] as const).filter(([w]) => w !== null)
    return new Promise((resolve) => {
      if (live.length === 0) {
        resolve([])
        return
      }
      const timer = setTimeout(() => {
        const p = this.#pending.get(generation)
        if (p === undefined) return
        this.#pending.delete(generation)
        for (const i of p.waiting) p.errors.push(`worker ${i}: did not answer within ${CONFIG_ACK_MS / 1000} s (its loop is busy); it applies this configuration when it is free`)
        resolve(p.errors)
      }, CONFIG_ACK_MS)
      timer.unref()
      this.#pending.set(generation, { resolve: (errors) => { clearTimeout(timer); resolve(errors) }, waiting: new Set(live.map(([, i]) => i)), errors: [] })
      for (const [w] of live) this.#send(w!, { type: 'config', generation, config, slots })
    })
  }

  #acmeSettle (seq: number, index: number): void {
    const p = this.#acmePending.get(seq)
    if (p === undefined || !p.waiting.delete(index) || p.waiting.size > 0) return
    this.#acmePending.delete(seq)
    p.resolve()
  }

  /**
   * Hands every worker the ACME certificates and challenge answers to serve;
   * resolves once each live worker applied it (at most ACME_ACK_MS: the CA is
   * told to validate only after this, so every worker must know the answer).
   */
  publishAcme (state: AcmeState): Promise<void> {
    this.#acme = state
    const seq = ++this.#acmeSeq
    const live = this.#slots.map((s, i) => [s.worker, i] as const).filter(([w]) => w !== null)
    if (live.length === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#acmePending.delete(seq)
        resolve()
      }, ACME_ACK_MS)
      timer.unref()
      this.#acmePending.set(seq, { resolve: () => { clearTimeout(timer); resolve() }, waiting: new Set(live.map(([, i]) => i)) })
      for (const [w] of live) this.#send(w!, { type: 'acme', seq, state })
    })
  }

  /**
   * Stops accepting and lets in-flight requests finish; at `timeoutMs` each
   * worker cuts what is left and exits by itself (core/worker/main.ts). Resolves
   * with how many requests were cut. terminate() is only the last resort for a
   * worker whose loop is stuck: uWS aborts the process when a thread is
   * terminated with requests open.
   */
  async drain (timeoutMs: number): Promise<number> {
    this.#stopping = true
    this.#cut = 0
    const exits = this.#slots.map((s) => s.worker === null
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
        s.worker!.once('exit', () => resolve())
        this.#send(s.worker!, { type: 'drain', timeoutMs })
      }))
    const timer = setTimeout(() => {
      for (const s of this.#slots) {
        if (s.worker === null) continue
        this.#log.error('worker did not exit after drain_timeout; terminating it', { worker: this.#slots.indexOf(s) })
        void s.worker.terminate()
      }
    }, timeoutMs + STUCK_MS)
    await Promise.all(exits)
    clearTimeout(timer)
    return this.#cut
  }
}
