// Clearing one source of a cluster-scope limit on every node (`clear table
// <limit> key <k>` on the runtime socket, DELETE stick_table_entries on the
// config API): one script deletes the source's counts in Redis and publishes
// its table key on <prefix>rl-clear; every node, the one that asked included,
// drops the entry from its cluster table and withdraws its own estimate at
// its next sync (one of its rounds may have been on the way and put it back).
// A node whose subscriber connection is down at that moment misses the
// message: its own count of the source stays until the entry expires.
import type { ClusterConf } from '../config/cluster.js'
import { clusterTable } from '../shm/cluster-table.js'
import type { RedisHealth } from './health.js'
import type { Subscriber } from './pubsub.js'
import type { RateSync } from './rate-sync.js'
import type { Redis } from './redis.js'
import { RATE_CLEAR, runScript } from './scripts.js'

/** The message: KEY_A and KEY_B as 8 hex digits each. */
const MESSAGE = /^[0-9a-f]{16}$/

export class RateClear {
  readonly #redis: Redis
  readonly #health: RedisHealth
  readonly #rates: RateSync
  readonly #i32: Int32Array
  readonly #channel: string

  constructor (redis: Redis, conf: ClusterConf, i32: Int32Array, health: RedisHealth, rates: RateSync, sub: Subscriber) {
    this.#redis = redis
    this.#health = health
    this.#rates = rates
    this.#i32 = i32
    this.#channel = conf.prefix + 'rl-clear'
    sub.on(this.#channel, (m) => {
      if (MESSAGE.test(m)) this.#forget(parseInt(m.slice(0, 8), 16) | 0, parseInt(m.slice(8), 16) | 0)
    })
  }

  /** Clears the source (ka, kb) here at once, then on every node through Redis; rejects when Redis does not answer (cleared here only). */
  async clear (ka: number, kb: number): Promise<void> {
    this.#forget(ka, kb)
    const hex = (v: number): string => (v >>> 0).toString(16).padStart(8, '0')
    await this.#health.track(() => runScript(this.#redis, RATE_CLEAR, [this.#rates.keyOf(ka, kb)], [this.#channel, hex(ka) + hex(kb)]))
  }

  #forget (ka: number, kb: number): void {
    const t = clusterTable(this.#i32)
    t?.table.clear(ka, kb, t.cx)
    this.#rates.withdraw(this.#rates.keyOf(ka, kb))
  }
}
