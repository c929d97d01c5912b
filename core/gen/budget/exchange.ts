// Budgets across the nodes of a cluster ([cluster]): every sync_interval the
// generation service tells Redis what each key's consumer used on this node in
// the current windows, and reads what the other nodes told; the ledger then
// charges a consumer its own node's counts plus the others' (Ledger.setOthers).
// The request path never waits for Redis.
//
// Keys: <prefix>gb:m:<minute>:<consumer> (hash: node → "requests:tokens", kept
// two minutes) and <prefix>gb:d:<day>:<consumer> (hash: node → tokens, kept a
// day and an hour). Each node writes its absolute counts, not increments: a
// round that is lost or repeated changes nothing, and a node that stops
// counts until its windows end.
//
// Approximate, unlike the cluster rate limit's leases: between two rounds each
// node admits on the others' counts of the last round, so a consumer can go
// over by what the other nodes admitted in one sync_interval (with N nodes at
// most N - 1 times that). Consumers without a key are not exchanged (their
// number is unbounded): each node counts them on its own. With Redis down the
// nodes keep the others' last counts until the window ends, then count alone.

import type { Redis } from 'ioredis'
import type { Logger } from '../../log.js'
import type { Ledger, WindowCounts } from './ledger.js'

const MINUTE_KEEP_MS = 120_000
const DAY_KEEP_MS = 86_400_000 + 3_600_000

/** What the exchange needs of [cluster] (core/cluster/index.ts holds the connection). */
export interface BudgetCluster {
  readonly redis: Redis
  /** [cluster] prefix of every key */
  readonly prefix: string
  /** this node's name in the cluster */
  readonly node: string
  readonly syncIntervalMs: number
}

/** The sum of the other nodes' fields of a hash of "a:b" (or "a") values. */
function othersOf (h: Record<string, string>, node: string): [number, number] {
  let a = 0
  let b = 0
  for (const [k, v] of Object.entries(h)) {
    if (k === node) continue
    const [x = '0', y = '0'] = v.split(':')
    a += Number(x) || 0
    b += Number(y) || 0
  }
  return [a, b]
}

export class BudgetExchange {
  readonly #c: BudgetCluster
  readonly #ledger: Ledger
  readonly #consumers: readonly string[]
  readonly #log: Logger
  #timer: NodeJS.Timeout | null = null
  #running = false
  #failing = false

  constructor (c: BudgetCluster, ledger: Ledger, consumers: readonly string[], log: Logger) {
    this.#c = c
    this.#ledger = ledger
    this.#consumers = consumers
    this.#log = log
  }

  start (): void {
    if (this.#consumers.length === 0 || this.#timer !== null) return
    this.#timer = setInterval(() => { void this.round() }, this.#c.syncIntervalMs)
    this.#timer.unref()
  }

  stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  /** One exchange (one pipeline: three commands per window per consumer); rounds never overlap. */
  async round (): Promise<void> {
    if (this.#running) return
    this.#running = true
    try {
      const { redis, prefix, node } = this.#c
      const p = redis.pipeline()
      const mine: WindowCounts[] = []
      for (const c of this.#consumers) {
        const l = this.#ledger.local(c)
        mine.push(l)
        const mk = `${prefix}gb:m:${l.minute}:${c}`
        const dk = `${prefix}gb:d:${l.day}:${c}`
        p.hset(mk, node, `${l.requests}:${l.minuteTokens}`).pexpire(mk, MINUTE_KEEP_MS).hgetall(mk)
        p.hset(dk, node, String(l.dayTokens)).pexpire(dk, DAY_KEEP_MS).hgetall(dk)
      }
      const replies = await p.exec()
      if (replies === null) throw new Error('the pipeline was discarded')
      this.#consumers.forEach((c, i) => {
        const m = replies[i * 6 + 2]!
        const d = replies[i * 6 + 5]!
        if (m[0] !== null || d[0] !== null) throw m[0] ?? d[0]!
        const [requests, minuteTokens] = othersOf(m[1] as Record<string, string>, node)
        const [dayTokens] = othersOf(d[1] as Record<string, string>, node)
        const l = mine[i]!
        this.#ledger.setOthers(c, { minute: l.minute, day: l.day, requests, minuteTokens, dayTokens })
      })
      if (this.#failing) this.#log.info('generation budgets: exchanging with the cluster again')
      this.#failing = false
    } catch (err) {
      if (!this.#failing) this.#log.warn('generation budgets: cannot exchange with the cluster; each node counts on its own meanwhile', { err: (err as Error).message })
      this.#failing = true
    } finally {
      this.#running = false
    }
  }
}
