// Leases of the cluster's rate limits (#38): each node holds, per source, a
// lease granted by Redis out of what the other nodes' leases leave of the
// limit, and its workers admit on shared memory while the source stays within
// it on this node. The leases never sum past the limit, so neither does what
// the nodes admit together, however the requests arrive; the request path
// talks to no one while a lease lasts. What a lease is depends on the kind of
// limit (core/cluster/lease-terms.ts): a sliding window's is the most window
// estimate this node may reach (core/cluster/window-lease.ts), a bucket's a
// part of its capacity and of its rate (core/cluster/bucket-lease.ts). This
// file is the mechanics, one for every kind.
//
// A worker past its lease that may ask for more (CX_ROOM) marks the entry
// (CX_WANT), rings the bell (CLH_BELL) and waits for the next round
// (CLH_GRANTS): the bell makes the control plane ask at once for every entry
// waiting, each for a chunk more than it holds. Every sync_interval a round
// goes over every live entry, which asks for what it uses and gives back the
// rest for the other nodes.
//
// A lease only shrinks here first and in Redis after, and only grows in Redis
// first and here after, so Redis always holds at least what the workers go by.
// Rounds run one at a time: two in flight could store their grants out of order.
import type { ClusterConf } from '../config/cluster.js'
import { now } from '../clock.js'
import {
  CLH_BELL, CLH_GRANTS, CLH_NODES, CLUSTER_BASE, CLUSTER_EXTRA, CLUSTER_SETS, CLUSTER_TABLE, CX_DRAIN, CX_KA, CX_PERIOD, CX_WANT, CX_WORDS,
  RATE_DATA_WORDS, RATE_SET_WORDS, RATE_WAYS, RS_DATA, RS_KEY_A, RS_KEY_B,
} from '../shm/layout.js'
import { RateTable } from '../shm/rate-table.js'
import { bucketTerms } from './bucket-lease.js'
import type { LeaseRound, LeaseTerms } from './lease-terms.js'
import type { RedisHealth } from './health.js'
import type { Redis } from './redis.js'
import { redisRateKey, runScript } from './scripts.js'
import { windowTerms } from './window-lease.js'

/** Sources per script call: bounds one call's time inside Redis (it blocks other clients while it runs). */
const BATCH = 500
/** ms the bell listener waits at a time: how long stop() takes to end it */
const LISTEN_MS = 250

type WaitAsync = (a: Int32Array, i: number, v: number, ms: number) => { async: boolean, value: unknown }
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync

/** One entry's ask in a round: where it is, its Redis key and its kind's ARGV words. */
interface Ask { way: number, ka: number, kb: number, key: string, args: number[] }

/** The kinds of lease, in the order a round sends them: sliding windows (CX_DRAIN 0), buckets. */
const KINDS: readonly LeaseTerms[] = [windowTerms, bucketTerms]

export class RateLease {
  readonly #redis: Redis
  readonly #conf: ClusterConf
  readonly #i32: Int32Array
  readonly #health: RedisHealth
  readonly #table: RateTable
  #queue: Promise<unknown> = Promise.resolve()
  #bellQueued = false
  #listening = false
  /** tick (core/clock.ts) at which the last periodic round collected */
  #lastRound = 0

  constructor (redis: Redis, conf: ClusterConf, i32: Int32Array, health: RedisHealth) {
    this.#redis = redis
    this.#conf = conf
    this.#i32 = i32
    this.#health = health
    this.#table = new RateTable(i32, CLUSTER_TABLE, CLUSTER_SETS)
    this.#lastRound = now()
  }

  start (): void {
    if (this.#listening) return
    this.#listening = true
    void this.#listen()
  }

  stop (): void {
    this.#listening = false
  }

  /** The periodic round: every live entry; resolves to their number, rejects when Redis did not answer. */
  periodic (): Promise<number> {
    return this.#enqueue(false)
  }

  async #listen (): Promise<void> {
    const i32 = this.#i32
    let seen = Atomics.load(i32, CLUSTER_BASE + CLH_BELL)
    while (this.#listening) {
      const w = waitAsync(i32, CLUSTER_BASE + CLH_BELL, seen, LISTEN_MS)
      if (w.async) await w.value
      const rung = Atomics.load(i32, CLUSTER_BASE + CLH_BELL)
      if (rung === seen) continue
      seen = rung
      // one bell round waiting to start serves every worker that rings meanwhile
      if (this.#bellQueued) continue
      this.#bellQueued = true
      this.#enqueue(true).catch(() => {}) // reported to the health by track()
    }
  }

  #enqueue (bell: boolean): Promise<number> {
    const p = this.#queue.then(() => this.#round(bell))
    this.#queue = p.catch(() => {})
    return p
  }

  async #round (bell: boolean): Promise<number> {
    if (bell) this.#bellQueued = false
    const t = now()
    try {
      const asks = this.#collect(t, bell)
      if (!bell) this.#lastRound = t
      let n = 0
      for (let k = 0; k < KINDS.length; k++) {
        const terms = KINDS[k]!
        const all = asks[k]!
        n += all.length
        for (let i = 0; i < all.length; i += BATCH) {
          const batch = all.slice(i, i + BATCH)
          const args: Array<string | number> = [this.#conf.node, this.#conf.nodeTtlMs]
          for (const a of batch) args.push(...a.args)
          const out = await this.#health.track(() => runScript(this.#redis, terms.script, batch.map((a) => a.key), args)) as number[]
          const stored = now()
          for (let j = 0; j < batch.length; j++) this.#store(terms, batch[j]!, stored, out, j * terms.outWords)
        }
      }
      return n
    } finally {
      // wakes the workers waiting for a lease, granted or not: they decide again (Redis down: on the local share)
      Atomics.add(this.#i32, CLUSTER_BASE + CLH_GRANTS, 1)
      Atomics.notify(this.#i32, CLUSTER_BASE + CLH_GRANTS)
    }
  }

  /**
   * What to ask for each entry, by kind (KINDS): the waiting ones (bell), or
   * every live one. Each set is locked while its entries' leases are lowered
   * to what is asked (an idle entry gives back the rest: here first, then in Redis).
   */
  #collect (t: number, bell: boolean): Ask[][] {
    const i32 = this.#i32
    const r: LeaseRound = { t, lastRound: this.#lastRound, nodes: Math.max(1, Atomics.load(i32, CLUSTER_BASE + CLH_NODES)), staleMs: this.#conf.nodeTtlMs }
    const asks: Ask[][] = KINDS.map(() => [])
    for (let s = 0; s < CLUSTER_SETS; s++) {
      const set = CLUSTER_TABLE + s * RATE_SET_WORDS
      // a bell round locks only the sets with a waiting entry: it may run back to back under a flood of new sources
      if (bell && !this.#wanted(s)) continue
      this.#table.lockSet(set)
      for (let w = 0; w < RATE_WAYS; w++) {
        const ka = i32[set + RS_KEY_A + w]!
        if (ka === 0) continue
        const x = CLUSTER_EXTRA + (s * RATE_WAYS + w) * CX_WORDS
        if (i32[x + CX_KA] !== ka || i32[x + CX_PERIOD]! <= 0) continue
        const wanted = i32[x + CX_WANT] === 1
        if (bell && !wanted) continue
        const k = i32[x + CX_DRAIN] === 0 ? 0 : 1
        const args = KINDS[k]!.ask(i32, set + RS_DATA + w * RATE_DATA_WORDS, x, r, wanted)
        i32[x + CX_WANT] = 0
        if (args === null) continue
        const kb = i32[set + RS_KEY_B + w]!
        asks[k]!.push({ way: s * RATE_WAYS + w, ka, kb, key: redisRateKey(this.#conf.prefix, ka, kb), args })
      }
      this.#table.unlockSet(set)
    }
    return asks
  }

  /** Whether set `s` has an entry a worker waits on: read without the lock, as a worker writes CX_WANT before it rings (Atomics.add). */
  #wanted (s: number): boolean {
    for (let w = 0; w < RATE_WAYS; w++) if (this.#i32[CLUSTER_EXTRA + (s * RATE_WAYS + w) * CX_WORDS + CX_WANT] === 1) return true
    return false
  }

  /** Writes a grant into the entry's extras, under the set's lock, unless the way changed hands meanwhile. */
  #store (terms: LeaseTerms, a: Ask, t: number, out: readonly number[], at: number): void {
    const i32 = this.#i32
    const set = CLUSTER_TABLE + Math.floor(a.way / RATE_WAYS) * RATE_SET_WORDS
    const w = a.way % RATE_WAYS
    const x = CLUSTER_EXTRA + a.way * CX_WORDS
    this.#table.lockSet(set)
    if (i32[set + RS_KEY_A + w] === a.ka && i32[set + RS_KEY_B + w] === a.kb && i32[x + CX_KA] === a.ka) {
      terms.grant(i32, set + RS_DATA + w * RATE_DATA_WORDS, x, t, a.args, out, at)
    }
    this.#table.unlockSet(set)
  }
}
