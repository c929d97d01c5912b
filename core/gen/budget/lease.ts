// Budgets across the nodes of a cluster ([cluster]), as the cluster rate
// limit's leases (core/cluster/rate-lease.ts): this node holds, per consumer
// with a key, a lease of requests in the UTC minute, tokens in the minute and
// tokens in the UTC day, granted by Redis (lease-script.ts) out of what the
// other nodes hold, and admits on it (Ledger.admit) with no Redis round trip.
// The leases never sum past the limits, so neither does what the nodes admit
// together (tokens: within the bound of ledger.ts, per node).
//
// A request past its node's lease rings for a round (need()) and waits for it
// (Budget.admit): the round asks, in one script call, for every consumer with a
// request waiting, each its use plus a chunk. Every sync_interval a round goes
// over every consumer: an active one asks for its use plus what it grew by, an
// idle one for its use only, which gives back the rest to the other nodes.
// A lease shrinks here first (Ledger.leaseAsk) and in Redis after, and grows in
// Redis first and here after (Ledger.setLease), so Redis always holds at least
// what this node admits on. Rounds run one at a time.
//
// Redis down (health): the ledger counts as before the leases, this node's
// counts plus the other nodes' at the last round (each node alone once the
// window ends). Consumers without a key are not leased (their number is
// unbounded): each node counts them on its own.

import type { GenLimits } from '../../config/generation.js'
import type { Logger } from '../../log.js'
import type { Ledger, LeaseAsk } from './ledger.js'
import { ARGS_PER_CONSUMER, BUDGET_LEASE, dayKey, minuteKey, OUT_PER_CONSUMER } from './lease-script.js'

/** Consumers per script call: bounds one call's time inside Redis (it blocks other clients while it runs). */
const BATCH = 200
const MINUTE_KEEP_MS = 120_000
const DAY_KEEP_MS = 86_400_000 + 3_600_000

/** What the leases need of [cluster] (core/main.ts builds it from core/cluster/index.ts). */
export interface BudgetCluster {
  /** [cluster] prefix of every key */
  readonly prefix: string
  /** this node's name in the cluster */
  readonly node: string
  readonly syncIntervalMs: number
  /** after this long without a round a node's leases no longer count (node_ttl) */
  readonly nodeTtlMs: number
  /** whether this node judges Redis reachable (core/cluster/health.ts) */
  up (): boolean
  /** live nodes at the last heartbeat */
  nodes (): number
  /** runs a Lua script (EVALSHA), its outcome reported to the cluster's Redis health; rejects when Redis did not answer */
  run (script: string, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown>
}

export interface LeasedConsumer { readonly id: string, readonly limits: GenLimits }

export class BudgetLease {
  readonly #c: BudgetCluster
  readonly #ledger: Ledger
  readonly #consumers: readonly LeasedConsumer[]
  readonly #log: Logger
  #timer: NodeJS.Timeout | null = null
  #queue: Promise<unknown> = Promise.resolve()
  /** the bell round queued and not started yet: every request that rings meanwhile waits for it */
  #bell: Promise<void> | null = null
  #failing = false

  constructor (c: BudgetCluster, ledger: Ledger, consumers: readonly LeasedConsumer[], log: Logger) {
    this.#c = c
    this.#ledger = ledger
    this.#consumers = consumers.filter((x) => x.limits.rpm > 0 || x.limits.tpm > 0 || x.limits.tpd > 0)
    this.#log = log
  }

  /** Whether admissions go by the leases now (Redis judged up). */
  get active (): boolean { return this.#timer !== null && this.#c.up() }

  start (): void {
    if (this.#consumers.length === 0 || this.#timer !== null) return
    this.#timer = setInterval(() => { this.#enqueue(false).catch(() => {}) }, this.#c.syncIntervalMs)
    this.#timer.unref()
    this.#ledger.setLeasing(true)
  }

  stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    this.#ledger.setLeasing(false)
  }

  /** A request waits for a lease (Ledger.admit marked its consumer): resolves after the next bell round, granted or not. */
  need (): Promise<void> {
    this.#bell ??= this.#enqueue(true).then(() => {}, () => {})
    return this.#bell
  }

  #enqueue (bell: boolean): Promise<void> {
    const p = this.#queue.then(() => this.#round(bell))
    this.#queue = p.catch(() => {})
    return p
  }

  async #round (bell: boolean): Promise<void> {
    if (bell) this.#bell = null
    const nodes = this.#c.nodes()
    const asks: LeaseAsk[] = []
    const limits: GenLimits[] = []
    for (const x of this.#consumers) {
      const a = this.#ledger.leaseAsk(x.id, x.limits, bell, nodes)
      if (a === null) continue
      asks.push(a)
      limits.push(x.limits)
    }
    const { prefix, node, nodeTtlMs } = this.#c
    try {
      for (let i = 0; i < asks.length; i += BATCH) {
        const batch = asks.slice(i, i + BATCH)
        const keys: string[] = []
        const args: Array<string | number> = [node, nodeTtlMs]
        for (const a of batch) {
          keys.push(minuteKey(prefix, a.minute, a.consumer), dayKey(prefix, a.day, a.consumer))
          args.push(...a.numbers, MINUTE_KEEP_MS, DAY_KEEP_MS)
        }
        const out = await this.#c.run(BUDGET_LEASE, keys, args) as number[]
        if (out.length !== batch.length * OUT_PER_CONSUMER || args.length !== 2 + batch.length * ARGS_PER_CONSUMER) throw new Error('unexpected reply of the budget lease script')
        batch.forEach((a, j) => this.#ledger.setLease(a, limits[i + j]!, out.slice(j * OUT_PER_CONSUMER, (j + 1) * OUT_PER_CONSUMER)))
      }
      if (this.#failing) this.#log.info('generation budgets: leases from the cluster again')
      this.#failing = false
    } catch (err) {
      if (!this.#failing) this.#log.warn('generation budgets: no lease round with the cluster; while Redis is judged down each node counts on its own', { err: (err as Error).message })
      this.#failing = true
      throw err
    }
  }
}
