// The exchange of cluster-scope rate-limit counts with Redis, every
// sync_interval, in one script call per batch (never a command per request).
// Sliding windows go by leases instead (core/cluster/rate-lease.ts), whose
// periodic round runs here after the buckets'.
//
// Each node publishes, for every live bucket of its cluster table, its in 1/1000 request (not a delta: a restarted Redis is whole again after
// one round), and reads back the sum of the other nodes' estimates, which it
// writes into the entry's extras (CX_OTHERS; CX_SYNCED = what it sent) for the
// workers' next decisions (core/shm/cluster-limit.ts). An estimate of a node
// that stops sending (dead, or cut from Redis) goes stale after node_ttl.
import type { ClusterConf } from '../config/cluster.js'
import { now } from '../clock.js'
import {
  CLUSTER_EXTRA, CLUSTER_SETS, CLUSTER_TABLE, CX_DRAIN, CX_KA, CX_OTHERS, CX_PERIOD, CX_SYNCED, CX_WORDS,
  RATE_DATA_WORDS, RATE_SET_WORDS, RATE_WAYS, RD_A, RD_EXPIRE, RD_TICK, RS_DATA, RS_KEY_A, RS_KEY_B,
} from '../shm/layout.js'
import { drainShare } from '../shm/cluster-limit.js'
import { RateTable } from '../shm/rate-table.js'
import type { RedisHealth } from './health.js'
import type { Redis } from './redis.js'
import { RateLease } from './rate-lease.js'
import { RATE_SYNC, redisRateKey, runScript } from './scripts.js'

/** Sources per script call: bounds one call's time inside Redis (it blocks other clients while it runs). */
const BATCH = 500

export class RateSync {
  readonly #redis: Redis
  readonly #conf: ClusterConf
  readonly #i32: Int32Array
  readonly #health: RedisHealth
  readonly #table: RateTable
  readonly #lease: RateLease
  #timer: NodeJS.Timeout | null = null
  #running = false
  /** ms since the epoch of the last successful sync (0 = none) */
  lastSync = 0
  /** seconds the last successful sync took, all batches */
  lastSeconds = 0
  /** sources sent at the last successful sync */
  lastSources = 0
  /** Redis keys of cleared sources whose estimate this node must withdraw (core/cluster/rate-clear.ts) */
  readonly #withdraw = new Set<string>()

  constructor (redis: Redis, conf: ClusterConf, i32: Int32Array, health: RedisHealth) {
    this.#redis = redis
    this.#conf = conf
    this.#i32 = i32
    this.#health = health
    this.#table = new RateTable(i32, CLUSTER_TABLE, CLUSTER_SETS)
    this.#lease = new RateLease(redis, conf, i32, health)
  }

  start (): void {
    this.#lease.start()
    this.#timer = setInterval(() => { void this.sync() }, this.#conf.syncIntervalMs)
    this.#timer.unref()
  }

  stop (): void {
    this.#lease.stop()
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  /**
   * Withdraws this node's estimate of a cleared source from Redis at the next
   * round: a round already on its way may have put it back after the clear.
   */
  withdraw (redisKey: string): void {
    this.#withdraw.add(redisKey)
  }

  /** One round: collect, send in batches, write back. A round still running skips the next tick. */
  async sync (): Promise<void> {
    if (this.#running) return
    this.#running = true
    const started = performance.now()
    try {
      await this.#sendWithdrawals()
      const found = this.#collect(now())
      for (let i = 0; i < found.ways.length; i += BATCH) {
        const ways = found.ways.slice(i, i + BATCH)
        const ests = found.ests.slice(i, i + BATCH)
        const keys = found.keys.slice(i, i + BATCH)
        const args: Array<string | number> = [this.#conf.node, this.#conf.nodeTtlMs]
        for (let j = 0; j < ways.length; j++) args.push(ests[j]!, 2 * this.#i32[this.#extra(ways[j]!) + CX_PERIOD]! + this.#conf.nodeTtlMs)
        const others = await this.#health.track(() => runScript(this.#redis, RATE_SYNC, keys, args)) as number[]
        for (let j = 0; j < ways.length; j++) this.#store(ways[j]!, found.kas[i + j]!, found.kbs[i + j]!, ests[j]!, others[j] ?? 0)
      }
      const windows = await this.#lease.periodic()
      this.lastSync = Date.now()
      this.lastSeconds = (performance.now() - started) / 1000
      this.lastSources = found.ways.length + windows
    } catch {
      // reported to the health by track(); a round with nothing to send spoke to no one and said nothing of Redis
    } finally {
      this.#running = false
    }
  }

  /** An estimate of 0 (the script's HDEL) for every withdrawn key; kept for the next round when Redis does not answer. */
  async #sendWithdrawals (): Promise<void> {
    if (this.#withdraw.size === 0) return
    const keys = [...this.#withdraw]
    this.#withdraw.clear()
    const args: Array<string | number> = [this.#conf.node, this.#conf.nodeTtlMs]
    for (let j = 0; j < keys.length; j++) args.push(0, this.#conf.nodeTtlMs)
    try {
      await this.#health.track(() => runScript(this.#redis, RATE_SYNC, keys, args))
    } catch (err) {
      for (const k of keys) this.#withdraw.add(k)
      throw err
    }
  }

  /** The Redis key of a source: both halves of its table key, so every node names it alike. */
  keyOf (ka: number, kb: number): string {
    return redisRateKey(this.#conf.prefix, ka, kb)
  }

  /**
   * Ways (global index s * RATE_WAYS + w) with something to tell: a live
   * estimate, or a last 0 after one. Each with its source's table key and
   * Redis key as they are now: batches after the first are sent after an
   * await, when a way may have changed hands, and its estimate must still go
   * under the key of the source it was made for.
   */
  #collect (t: number): { ways: number[], kas: number[], kbs: number[], keys: string[], ests: number[] } {
    const i32 = this.#i32
    const ways: number[] = []
    const kas: number[] = []
    const kbs: number[] = []
    const keys: string[] = []
    const ests: number[] = []
    for (let s = 0; s < CLUSTER_SETS; s++) {
      const set = CLUSTER_TABLE + s * RATE_SET_WORDS
      for (let w = 0; w < RATE_WAYS; w++) {
        const ka = i32[set + RS_KEY_A + w]!
        if (ka === 0) continue
        const x = this.#extra(s * RATE_WAYS + w)
        const period = i32[x + CX_PERIOD]!
        // sliding windows (CX_DRAIN 0) are the leases' (core/cluster/rate-lease.ts)
        if (period <= 0 || i32[x + CX_KA] !== ka || i32[x + CX_DRAIN] === 0) continue
        const d = set + RS_DATA + w * RATE_DATA_WORDS
        const expired = ((t - i32[d + RD_EXPIRE]!) | 0) >= 0
        const est = expired ? 0 : this.#estimate(d, x, t)
        if (est === 0 && i32[x + CX_SYNCED] === 0 && i32[x + CX_OTHERS] === 0) continue
        const kb = i32[set + RS_KEY_B + w]!
        ways.push(s * RATE_WAYS + w)
        kas.push(ka)
        kbs.push(kb)
        keys.push(this.keyOf(ka, kb))
        ests.push(est)
      }
    }
    return { ways, kas, kbs, keys, ests }
  }

  /** What this node counts now for the bucket at data words `d`, extras `x`: its level drained to `t`. */
  #estimate (d: number, x: number, t: number): number {
    const i32 = this.#i32
    const drainUs = i32[x + CX_DRAIN]!
    // units per ms = requests per second = 1e6 / µs per request, times this node's part of the rate
    const elapsed = Math.max(0, (t - i32[d + RD_TICK]!) | 0)
    return Math.max(0, Math.ceil(i32[d + RD_A]! - (elapsed * 1e6 * drainShare(i32, x)) / drainUs))
  }

  #extra (way: number): number {
    return CLUSTER_EXTRA + way * CX_WORDS
  }

  /** Writes what Redis said into the way's extras, under the set's lock, unless the way changed hands meanwhile. */
  #store (way: number, ka: number, kb: number, est: number, others: number): void {
    const i32 = this.#i32
    const set = CLUSTER_TABLE + Math.floor(way / RATE_WAYS) * RATE_SET_WORDS
    const w = way % RATE_WAYS
    const x = this.#extra(way)
    this.#table.lockSet(set)
    if (i32[set + RS_KEY_A + w] === ka && i32[set + RS_KEY_B + w] === kb && i32[x + CX_KA] === ka) {
      i32[x + CX_OTHERS] = Math.min(others, 0x7fff_ffff) // bucket levels of many nodes may pass an Int32
      i32[x + CX_SYNCED] = est
    }
    this.#table.unlockSet(set)
  }
}
