// Cluster mode ([cluster], docs/cluster.md), started by core/main.ts only when
// the section is present: this module and ioredis are not even imported
// otherwise. It joins the membership and runs the rate-limit sync; the shared
// configuration state runs on the same connection (core/cluster/shared-config.ts).
import { type ClusterConf, redact } from '../config/cluster.js'
import type { RevocationHub } from '../control/revocations.js'
import type { Logger } from '../log.js'
import { CLH_REFUSED_CLUSTER, CLH_REFUSED_LOCAL, CLUSTER_BASE } from '../shm/layout.js'
import { RedisHealth } from './health.js'
import { Membership } from './membership.js'
import { RateSync } from './rate-sync.js'
import { type Redis, openRedis } from './redis.js'
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
  readonly #revocations: RevocationSync
  /** the config API's state shared by the nodes (core/admin/config-store.ts uses it) */
  readonly config: SharedConfig

  private constructor (conf: ClusterConf, redis: Redis, i32: Int32Array, health: RedisHealth, config: SharedConfig, log: Logger, hub: RevocationHub) {
    this.health = health
    this.config = config
    this.conf = conf
    this.redis = redis
    this.#i32 = i32
    this.#membership = new Membership(redis, conf, i32, this.health)
    this.#rates = new RateSync(redis, conf, i32, this.health)
    this.#revocations = new RevocationSync(redis, conf, health, log, hub, () => this.#membership.nodes)
  }

  /**
   * Connects (in the background: Redis may be down) and starts heartbeats and the rate sync; the
   * session revocations of the cluster are read into `hub` before this resolves (when Redis answers).
   */
  static async start (conf: ClusterConf, i32: Int32Array, log: Logger, hub: RevocationHub): Promise<Cluster> {
    const health = new RedisHealth(i32, log, conf.url)
    const redis = await openRedis(conf, `lb:${conf.node}`, (r) => health.watch(r))
    const c = new Cluster(conf, redis, i32, health, await sharedConfig(redis, conf, health), log, hub)
    c.#membership.start()
    c.#rates.start()
    await c.#revocations.start()
    log.info('cluster: joining', { node: conf.node, redis: redact(conf.url), sync_interval_ms: conf.syncIntervalMs })
    return c
  }

  status (): ClusterStatus {
    return {
      node: this.conf.node,
      redis: redact(this.conf.url),
      redisUp: this.health.up,
      nodes: this.#membership.nodes,
      lastSync: this.#rates.lastSync,
      lastHeartbeat: this.#membership.lastBeat,
      syncSeconds: this.#rates.lastSeconds,
      syncSources: this.#rates.lastSources,
      refusedCluster: Atomics.load(this.#i32, CLUSTER_BASE + CLH_REFUSED_CLUSTER),
      refusedLocal: Atomics.load(this.#i32, CLUSTER_BASE + CLH_REFUSED_LOCAL),
      redisDowns: this.health.downs,
    }
  }

  /** Leaves the membership and closes the connection. */
  async close (): Promise<void> {
    this.#rates.stop()
    this.#revocations.close()
    this.config.close()
    await this.#membership.leave()
    this.redis.disconnect()
  }
}
