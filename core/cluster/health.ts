// Whether this node reaches Redis, as its last command found. Every command's
// outcome is reported here; a change of health is logged once (not once per
// failed command) and written to the cluster header of shared memory, where
// the workers read it: CLH_UP = 0 makes every cluster-scope limit fall back to
// its local share within one sync interval (core/shm/cluster-limit.ts).
import { redact } from '../config/cluster.js'
import type { Logger } from '../log.js'
import { CLH_UP, CLUSTER_BASE } from '../shm/layout.js'

export class RedisHealth {
  readonly #i32: Int32Array
  readonly #log: Logger
  readonly #url: string
  #up = false
  #known = false
  /** times Redis went from reachable to unreachable */
  downs = 0

  constructor (i32: Int32Array, log: Logger, url: string) {
    this.#i32 = i32
    this.#log = log
    this.#url = redact(url)
  }

  get up (): boolean {
    return this.#up
  }

  ok (): void {
    if (this.#up) return
    this.#up = true
    this.#known = true
    Atomics.store(this.#i32, CLUSTER_BASE + CLH_UP, 1)
    this.#log.info('cluster: Redis reachable; cluster-wide rate limits apply', { redis: this.#url })
  }

  failed (err: Error): void {
    if (!this.#up && this.#known) return
    const wasUp = this.#up
    this.#up = false
    this.#known = true
    Atomics.store(this.#i32, CLUSTER_BASE + CLH_UP, 0)
    if (wasUp) this.downs++
    this.#log.error('cluster: Redis unreachable; each node limits to its share (limit ÷ live nodes) until it is back', { redis: this.#url, error: err.message })
  }
}
