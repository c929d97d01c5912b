// Membership: every node renews its entry in the nodes set every third of
// node_ttl; an entry not renewed within node_ttl (a dead node) is dropped by
// the next heartbeat of any node. The live count goes to shared memory
// (CLH_NODES), where the cluster-scope limits divide by it.
import type { ClusterConf } from '../config/cluster.js'
import { CLH_NODES, CLUSTER_BASE } from '../shm/layout.js'
import type { RedisHealth } from './health.js'
import type { Redis } from './redis.js'
import { HEARTBEAT, runScript } from './scripts.js'

export class Membership {
  readonly #redis: Redis
  readonly #conf: ClusterConf
  readonly #i32: Int32Array
  readonly #health: RedisHealth
  readonly #key: string
  #timer: NodeJS.Timeout | null = null
  /** live node names at the last heartbeat (this node first while Redis was never reached) */
  nodes: readonly string[]
  /** ms since the epoch of the last successful heartbeat (0 = none) */
  lastBeat = 0

  constructor (redis: Redis, conf: ClusterConf, i32: Int32Array, health: RedisHealth) {
    this.#redis = redis
    this.#conf = conf
    this.#i32 = i32
    this.#health = health
    this.#key = conf.prefix + 'nodes'
    this.nodes = [conf.node]
  }

  /** Heartbeats from now on; resolves after the first (answered or not), so the node starts knowing whether Redis answers. */
  start (): Promise<void> {
    const beat = (): void => { void this.beat() }
    const first = this.beat()
    this.#timer = setInterval(beat, Math.max(100, Math.floor(this.#conf.nodeTtlMs / 3)))
    this.#timer.unref()
    return first
  }

  async beat (): Promise<void> {
    try {
      const names = await this.#health.track(() => runScript(this.#redis, HEARTBEAT, [this.#key], [this.#conf.node, this.#conf.nodeTtlMs])) as string[]
      this.nodes = names.sort()
      this.lastBeat = Date.now()
      Atomics.store(this.#i32, CLUSTER_BASE + CLH_NODES, Math.max(1, names.length))
    } catch {
      // reported to the health by track()
    }
  }

  /** Stops heartbeating and leaves the set at once (a clean stop need not wait for the TTL). */
  async leave (): Promise<void> {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    await this.#redis.zrem(this.#key, this.#conf.node).catch(() => undefined)
  }
}
