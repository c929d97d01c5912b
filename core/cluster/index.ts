// Cluster mode ([cluster], docs/cluster.md), started by core/main.ts only when
// the section is present: this module and ioredis are not even imported
// otherwise. It joins the membership and runs the rate-limit sync; the shared
// configuration state runs on the same connection (core/cluster/shared-config.ts).
import { type ClusterConf, redisLabel } from '../config/cluster.js'
import type { RevocationHub } from '../control/revocations.js'
import type { Logger } from '../log.js'
import { CLH_REFUSED_CLUSTER, CLH_REFUSED_LOCAL, CLH_UNAVAILABLE, CLUSTER_BASE } from '../shm/layout.js'
import { RedisHealth } from './health.js'
import { Membership } from './membership.js'
import { type Subscriber, subscriber } from './pubsub.js'
import { RateClear } from './rate-clear.js'
import { RateSync } from './rate-sync.js'
import { type Redis, connectedTo, openRedis } from './redis.js'
import { RevocationSync } from './revocations.js'
import { type SharedConfig, sharedConfig } from './shared-config.js'
import type { ClusterStatus } from './status.js'

export class Cluster {
  readonly conf: ClusterConf
  readonly redis: Redis
  readonly health: RedisHealth
  readonly #i32: Int32Array
  readonly #membership: Membership
  readonly #rates: RateSync
  readonly #sub: Subscriber
  readonly #clear: RateClear
  readonly #revocations: RevocationSync
  /** the config API's state shared by the nodes (core/admin/config-api/config-store.ts uses it) */
  readonly config: SharedConfig

  private constructor (conf: ClusterConf, redis: Redis, i32: Int32Array, health: RedisHealth, log: Logger, hub: RevocationHub) {
    this.health = health
    this.conf = conf
    this.redis = redis
    this.#i32 = i32
    this.#sub = subscriber(redis)
    this.config = sharedConfig(redis, conf, health, this.#sub)
    this.#membership = new Membership(redis, conf, i32, this.health)
    this.#rates = new RateSync(redis, conf, i32, this.health)
    this.#clear = new RateClear(redis, conf, i32, health, this.#rates, this.#sub)
    this.#revocations = new RevocationSync(redis, conf, health, log, hub, () => this.#membership.nodes)
  }

  /**
   * Connects (in the background: Redis may be down) and starts heartbeats and the rate sync; the
   * session revocations of the cluster are read into `hub` before this resolves (when Redis answers).
   */
  static async start (conf: ClusterConf, i32: Int32Array, log: Logger, hub: RevocationHub): Promise<Cluster> {
    const health = new RedisHealth(i32, log, { fall: conf.fall, rise: conf.rise, label: redisLabel(conf) })
    const redis = await openRedis(conf, `lb:${conf.node}`, (r) => health.watch(r))
    const c = new Cluster(conf, redis, i32, health, log, hub)
    log.info('cluster: joining', { node: conf.node, redis: redisLabel(conf), sync_interval_ms: conf.syncIntervalMs })
    // the first heartbeat (bounded by max_wait) before the workers start: a failure_mode = "closed"
    // limit must not refuse the first requests of a node whose Redis answers
    await c.#membership.start()
    c.#rates.start()
    await c.#revocations.start()
    return c
  }

  status (): ClusterStatus {
    return {
      node: this.conf.node,
      redis: redisLabel(this.conf),
      redisAddress: connectedTo(this.redis),
      redisUp: this.health.up,
      nodes: this.#membership.nodes,
      lastSync: this.#rates.lastSync,
      lastHeartbeat: this.#membership.lastBeat,
      syncSeconds: this.#rates.lastSeconds,
      syncSources: this.#rates.lastSources,
      refusedCluster: Atomics.load(this.#i32, CLUSTER_BASE + CLH_REFUSED_CLUSTER),
      refusedLocal: Atomics.load(this.#i32, CLUSTER_BASE + CLH_REFUSED_LOCAL),
      redisDowns: this.health.downs,
      redisUps: this.health.ups,
      redisSlowReplies: this.health.slowReplies,
      redisErrors: this.health.errors,
      refusedUnavailable: Atomics.load(this.#i32, CLUSTER_BASE + CLH_UNAVAILABLE),
    }
  }

  /** Forgets one source of a cluster-scope limit on every node (core/cluster/rate-clear.ts); rejects when Redis does not answer (forgotten here only). */
  clearSource (ka: number, kb: number): Promise<void> {
    return this.#clear.clear(ka, kb)
  }

  /** Leaves the membership and closes the connection. */
  async close (): Promise<void> {
    this.#rates.stop()
    this.#revocations.close()
    this.config.close()
    this.#sub.close()
    await this.#membership.leave()
    this.redis.disconnect()
  }
}
