// Leases of the cluster's sliding-window limits (#38): each node holds, per
// source, a lease granted by Redis (the RATE_LEASE script) out of what the other
// nodes' leases leave of the limit, and its workers admit on shared memory
// while the source's window estimate on this node stays within it. The leases
// never sum past the limit, so neither does what the nodes admit together,
// however the requests arrive; the request path talks to no one while a lease
// lasts.
//
// A worker past its lease that may ask for more (CX_ROOM) marks the entry
// (CX_WANT), rings the bell (CLH_BELL) and waits for the next round
// (CLH_GRANTS): the bell makes the control plane ask at once for every entry
// waiting, each for its estimate plus a chunk (a quarter of limit ÷ live
// nodes, so a burst takes a few round trips, not one per request). Every
// sync_interval a round goes over every live entry: an entry with requests
// since the last round asks for its estimate plus what it grew by since (at
// least 1, at most a chunk), an idle one for its estimate only, which gives
// back the rest of its lease for the other nodes.
//
// A lease only shrinks here first and in Redis after, and only grows in Redis
// first and here after, so Redis always holds at least what the workers go by.
// Rounds run one at a time: two in flight could store their grants out of order.
import type { ClusterConf } from '../config/cluster.js'
import { now } from '../clock.js'
import {
  CLH_BELL, CLH_GRANTS, CLH_NODES, CLUSTER_BASE, CLUSTER_EXTRA, CLUSTER_SETS, CLUSTER_TABLE, CX_DRAIN, CX_KA, CX_LEASE, CX_LIMIT,
  CX_OTHERS, CX_PERIOD, CX_ROOM, CX_SYNCED, CX_WANT, CX_WORDS, RATE_DATA_WORDS, RATE_SET_WORDS, RATE_WAYS, RD_A, RD_B, RD_EXPIRE,
  RD_SEEN, RD_TICK, RS_DATA, RS_KEY_A, RS_KEY_B,
} from '../shm/layout.js'
import { RateTable, windowEstimate } from '../shm/rate-table.js'
import type { RedisHealth } from './health.js'
import type { Redis } from './redis.js'
import { RATE_LEASE, redisRateKey, runScript } from './scripts.js'

/** Sources per script call: bounds one call's time inside Redis (it blocks other clients while it runs). */
const BATCH = 500
/** ms the bell listener waits at a time: how long stop() takes to end it */
const LISTEN_MS = 250

type WaitAsync = (a: Int32Array, i: number, v: number, ms: number) => { async: boolean, value: unknown }
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync

interface Ask { way: number, ka: number, kb: number, key: string, floor: number, want: number, est: number, limit: number, ttl: number }

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

  /** The periodic round: every live sliding-window entry; resolves to their number, rejects when Redis did not answer. */
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
      for (let i = 0; i < asks.length; i += BATCH) {
        const batch = asks.slice(i, i + BATCH)
        const args: Array<string | number> = [this.#conf.node, this.#conf.nodeTtlMs]
        for (const a of batch) args.push(a.floor, a.want, a.est, a.limit, a.ttl)
        const out = await this.#health.track(() => runScript(this.#redis, RATE_LEASE, batch.map((a) => a.key), args)) as number[]
        for (let j = 0; j < batch.length; j++) this.#store(batch[j]!, out[2 * j] ?? batch[j]!.floor, out[2 * j + 1] ?? 0)
      }
      return asks.length
    } finally {
      // wakes the workers waiting for a lease, granted or not: they decide again (Redis down: on the local share)
      Atomics.add(this.#i32, CLUSTER_BASE + CLH_GRANTS, 1)
      Atomics.notify(this.#i32, CLUSTER_BASE + CLH_GRANTS)
    }
  }

  /**
   * What to ask for each entry: the waiting ones (bell), or every live one.
   * Each set is locked while its entries' leases are lowered to what is asked
   * (an idle entry gives back the rest: here first, then in Redis).
   */
  #collect (t: number, bell: boolean): Ask[] {
    const i32 = this.#i32
    const nodes = Math.max(1, Atomics.load(i32, CLUSTER_BASE + CLH_NODES))
    const asks: Ask[] = []
    for (let s = 0; s < CLUSTER_SETS; s++) {
      const set = CLUSTER_TABLE + s * RATE_SET_WORDS
      // a bell round locks only the sets with a waiting entry: it may run back to back under a flood of new sources
      if (bell && !this.#wanted(s)) continue
      this.#table.lockSet(set)
      for (let w = 0; w < RATE_WAYS; w++) {
        const ka = i32[set + RS_KEY_A + w]!
        if (ka === 0) continue
        const x = CLUSTER_EXTRA + (s * RATE_WAYS + w) * CX_WORDS
        if (i32[x + CX_KA] !== ka || i32[x + CX_DRAIN] !== 0 || i32[x + CX_PERIOD]! <= 0) continue
        if (bell && i32[x + CX_WANT] !== 1) continue
        const d = set + RS_DATA + w * RATE_DATA_WORDS
        const period = i32[x + CX_PERIOD]!
        const est = ((t - i32[d + RD_EXPIRE]!) | 0) >= 0 ? 0 : windowEstimate(i32[d + RD_TICK]!, i32[d + RD_A]!, i32[d + RD_B]!, t, period)
        const lease = i32[x + CX_LEASE]!
        const wanted = i32[x + CX_WANT] === 1
        if (!wanted && est === 0 && lease === 0 && i32[x + CX_OTHERS] === 0 && i32[x + CX_SYNCED] === 0) continue
        const limit = i32[x + CX_LIMIT]!
        const chunk = Math.max(1, Math.ceil(limit / (4 * nodes)))
        // waiting workers get a chunk; an entry with requests since the last round keeps room for
        // as many again (at least 1, at most a chunk), so a trickle holds little the others could use
        let want = est
        if (wanted) want += chunk
        else if (((i32[d + RD_SEEN]! - this.#lastRound) | 0) > 0) want += Math.min(chunk, Math.max(1, est - i32[x + CX_SYNCED]!))
        const floor = Math.min(want, lease)
        i32[x + CX_LEASE] = floor
        i32[x + CX_WANT] = 0
        const kb = i32[set + RS_KEY_B + w]!
        asks.push({ way: s * RATE_WAYS + w, ka, kb, key: redisRateKey(this.#conf.prefix, ka, kb), floor, want, est, limit, ttl: 2 * period + this.#conf.nodeTtlMs })
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
  #store (a: Ask, grant: number, others: number): void {
    const i32 = this.#i32
    const set = CLUSTER_TABLE + Math.floor(a.way / RATE_WAYS) * RATE_SET_WORDS
    const w = a.way % RATE_WAYS
    const x = CLUSTER_EXTRA + a.way * CX_WORDS
    this.#table.lockSet(set)
    if (i32[set + RS_KEY_A + w] === a.ka && i32[set + RS_KEY_B + w] === a.kb && i32[x + CX_KA] === a.ka) {
      i32[x + CX_LEASE] = grant
      i32[x + CX_ROOM] = grant >= a.want ? 1 : 0
      i32[x + CX_OTHERS] = Math.min(others, 0x7fff_ffff)
      i32[x + CX_SYNCED] = a.est
    }
    this.#table.unlockSet(set)
  }
}
