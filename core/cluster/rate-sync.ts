// The periodic exchange of cluster-scope rate-limit state with Redis, every
// sync_interval: the withdrawals of cleared sources (core/cluster/rate-clear.ts),
// then the periodic lease round of every live source, sliding windows and
// buckets alike (core/cluster/rate-lease.ts), in one script call per kind and
// batch (never a command per request). Each node publishes whole values, not
// deltas: a restarted Redis is whole again after one round. A node that stops
// sending (dead, or cut from Redis) goes stale after node_ttl.
import type { ClusterConf } from '../config/cluster.js'
import type { RedisHealth } from './health.js'
import type { Redis } from './redis.js'
import { RateLease } from './rate-lease.js'
import { RATE_SYNC, redisRateKey, runScript } from './scripts.js'

export class RateSync {
  readonly #redis: Redis
  readonly #conf: ClusterConf
  readonly #health: RedisHealth
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
    this.#health = health
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

  /** One round: withdrawals, then the leases. A round still running skips the next tick. */
  async sync (): Promise<void> {
    if (this.#running) return
    this.#running = true
    const started = performance.now()
    try {
      await this.#sendWithdrawals()
      const sources = await this.#lease.periodic()
      this.lastSync = Date.now()
      this.lastSeconds = (performance.now() - started) / 1000
      this.lastSources = sources
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
}
