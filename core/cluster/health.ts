// Whether this node reaches Redis, as its last command found. Every command's
// outcome is reported here; a change of health is logged once (not once per
// failed command) and written to the cluster header of shared memory, where
// the workers read it: CLH_UP = 0 makes every cluster-scope limit fall back to
// its local share within one sync interval (core/shm/cluster-limit.ts).
import { redact } from '../config/cluster.js'
import type { Logger } from '../log.js'
import type { Redis } from './redis.js'
import { CLH_UP, CLUSTER_BASE } from '../shm/layout.js'

export class RedisHealth {
  readonly #i32: Int32Array
  readonly #log: Logger
  readonly #url: string
  #up = false
  #known = false
  /** times Redis went from reachable to unreachable */
  downs = 0
  /** why the connection last failed (refused, TLS, WRONGPASS...); null once it is ready */
  #connectError: Error | null = null

  constructor (i32: Int32Array, log: Logger, url: string) {
    this.#i32 = i32
    this.#log = log
    this.#url = redact(url)
  }

  /**
   * Keeps the connection's own errors: with no offline queue a command on a
   * connection that could not be made fails with "Stream isn't writeable",
   * which says nothing of why (a wrong password, a certificate, a refusal).
   */
  watch (redis: Redis): void {
    redis.on('error', (err: Error) => { this.#connectError = err })
    redis.on('ready', () => { if (redis.status === 'ready') this.#connectError = null })
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
    const cause = this.#connectError !== null && /Stream isn't writeable|Connection is closed/.test(err.message) ? this.#connectError : err
    this.#log.error('cluster: Redis unreachable; each node limits to its share (limit ÷ live nodes) until it is back', { redis: this.#url, error: cause.message })
  }
}
