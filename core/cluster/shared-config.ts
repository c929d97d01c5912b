// The config API's state shared by the cluster (docs/cluster.md): one hash in
// Redis holding the state JSON (the state file's format) and its version, the
// one version of the whole cluster. Writes are compare-and-set on that version
// (CONFIG_CAS), so the same version written on two nodes succeeds once; each
// write is announced on a channel, and every node also reads the hash every
// CONFIG_POLL_MS, so a missed message (or a Redis restart) heals by itself.
// ConfigStore (core/admin/config-api/config-store.ts) keeps the local copy on disk and
// applies what this brings.
import type { ClusterConf } from '../config/cluster.js'
import type { RedisHealth } from './health.js'
import type { Subscriber } from './pubsub.js'
import type { Redis } from './redis.js'
import { CONFIG_CAS, CONFIG_SEED, runScript } from './scripts.js'

/** A full read of the shared state this often, ms (a write reaches a node within it even without pub/sub). */
export const CONFIG_POLL_MS = 1000

export interface SharedVersion {
  readonly version: number
  /** the state as JSON text */
  readonly text: string
}

export interface SharedConfig {
  /** The cluster's state (null: none yet); rejects when Redis does not answer within max_wait. */
  read (): Promise<SharedVersion | null>
  /** Stores `next` if the cluster's version is still `expected` (or none): true; false when another write came first. */
  commit (expected: number, next: SharedVersion): Promise<boolean>
  /** Puts this node's copy in Redis when Redis holds none or an older one. */
  seed (copy: SharedVersion): Promise<void>
  /** `f` runs on every write announced by a node, and every CONFIG_POLL_MS. */
  watch (f: () => void): void
  close (): void
}

export function sharedConfig (redis: Redis, conf: ClusterConf, health: RedisHealth, sub: Subscriber): SharedConfig {
  const key = conf.prefix + 'config'
  const channel = conf.prefix + 'config-changed'
  const watchers: Array<() => void> = []
  const notify = (): void => { for (const f of watchers) f() }
  sub.on(channel, notify)
  const timer = setInterval(notify, CONFIG_POLL_MS)
  timer.unref()
  return {
    read: () => health.track(() => redis.hmget(key, 'version', 'state')).then(([v, text]) => v == null || text == null ? null : { version: Number(v), text }),
    commit: (expected, next) => health.track(() => runScript(redis, CONFIG_CAS, [key], [expected, next.version, next.text, conf.node, channel])).then((r) => r === 0),
    seed: (copy) => health.track(() => runScript(redis, CONFIG_SEED, [key], [copy.version, copy.text, conf.node, channel])).then(() => undefined),
    watch: (f) => { watchers.push(f) },
    close: () => { clearInterval(timer) },
  }
}
