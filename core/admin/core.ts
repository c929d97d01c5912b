// What the sampler and the server view need of the running balancer: the admin
// context (context.ts) before the sampler exists. Its own module so that
// context.ts can name the Sampler without sampler.ts importing it back.
import type { Config } from '../config/load.js'
import type { SlotRegistry } from '../control/slots.js'
import type { Logger } from '../log.js'
import type { PluginStatus } from '../plugin.js'
import type { Shm } from '../shm/layout.js'
import type { ConfigStore } from './config-api/config-store.js'
import type { CertificateStatus, OrderCounts } from '../acme/manager.js'
import type { ClusterView } from '../cluster/status.js'

export interface AdminCore {
  readonly configPath: string
  readonly config: () => Config
  readonly generation: () => number
  readonly shm: Shm
  readonly slots: SlotRegistry
  readonly log: Logger
  readonly apply: (next: Config) => Promise<string[]>
  /** problems when `next` does not fit the shared memory's capacities (core/config/capacity.ts); empty = fits */
  readonly fits: (next: Config) => string[]
  /** process start, ms since the epoch */
  readonly startedAt: number
  readonly store: ConfigStore
  /** the ACME resolvers' certificates and order counts (core/acme/manager.ts); absent = none */
  readonly certificates?: {
    status (): CertificateStatus[]
    counts (): ReadonlyMap<string, OrderCounts>
  }
  /** a middleware's runtime status as its instances report it (PluginEnv.setStatus); null or absent = not reported */
  readonly middlewareStatus?: (name: string) => { status: PluginStatus, message: string } | null
  /** [cluster] state (core/cluster); null without [cluster] */
  readonly cluster: ClusterView
  /** forgets a source of a cluster-scope limit on every node through Redis (core/cluster/rate-clear.ts); absent without [cluster] */
  readonly clusterClear?: (ka: number, kb: number) => Promise<void>
}
