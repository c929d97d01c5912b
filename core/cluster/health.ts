// Whether this node reaches Redis, judged from every command's outcome, and
// written to the cluster header of shared memory, where the workers read it:
// CLH_UP = 0 makes every cluster-scope limit fall back to its local share (or,
// with failure_mode = "closed", refuse) within one sync interval
// (core/shm/cluster-limit.ts).
//
// One slow reply is not an outage: on a busy host a healthy Redis sometimes
// answers after max_wait. Redis is judged down after `fall` failed commands in
// a row (HAProxy's health-check `fall`), where failures that overlap count
// once: a command sent before the previous counted failure came back was
// waiting through the same stall. So with the defaults (fall 3, max_wait
// 50 ms) Redis is down when three separate tries, each given 50 ms, got no
// answer: a Redis silent for 150 ms or less never is. A refused connection
// fails at once, so a Redis that is gone is down after the same three tries.
// Down, it is up again after `rise` answered commands in a row. A failure
// below `fall` is logged at debug level; each change of health once (error,
// info). Every failure is counted for the metrics.
import type { Logger } from '../log.js'
import type { Redis } from './redis.js'
import { CLH_UP, CLUSTER_BASE } from '../shm/layout.js'

export interface HealthOptions {
  readonly fall: number
  readonly rise: number
  /** the Redis as logs name it (redacted URL, or the sentinels) */
  readonly label: string
}

export class RedisHealth {
  readonly #i32: Int32Array
  readonly #log: Logger
  readonly #o: HealthOptions
  /** null until the first judgement (at start-up: neither answered nor failed `fall` times) */
  #up: boolean | null = null
  /** counted failures since the last answer */
  #failures = 0
  /** answers in a row while down */
  #answers = 0
  /** performance.now() when the last counted failure came back */
  #lastCounted = -Infinity
  /** times Redis went from reachable to unreachable */
  downs = 0
  /** times Redis came back after being judged unreachable */
  ups = 0
  /** commands that got no answer within max_wait (each one, also those that did not make Redis down) */
  slowReplies = 0
  /** commands that failed otherwise: refused or closed connection, an error reply */
  errors = 0
  /** why the connection last failed (refused, TLS, WRONGPASS...); null once it is ready */
  #connectError: Error | null = null

  constructor (i32: Int32Array, log: Logger, o: HealthOptions) {
    this.#i32 = i32
    this.#log = log
    this.#o = o
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
    return this.#up === true
  }

  /** Runs one command, reporting its outcome; rethrows its failure. */
  async track<T> (command: () => Promise<T>): Promise<T> {
    const sent = performance.now()
    let v: T
    try {
      v = await command()
    } catch (err) {
      this.failed(err as Error, sent)
      throw err
    }
    this.ok()
    return v
  }

  ok (): void {
    this.#failures = 0
    if (this.#up === true) return
    if (this.#up === false && ++this.#answers < this.#o.rise) return
    if (this.#up === false) this.ups++
    this.#up = true
    Atomics.store(this.#i32, CLUSTER_BASE + CLH_UP, 1)
    this.#log.info('cluster: Redis reachable; cluster-wide rate limits apply', { redis: this.#o.label })
  }

  /** A command sent at `sent` (performance.now()) failed with `err`. */
  failed (err: Error, sent: number): void {
    if (err.message.startsWith('Command timed out')) this.slowReplies++
    else this.errors++
    this.#answers = 0
    if (this.#up === false) return
    // sent before the last counted failure came back: the same stall, not more evidence
    if (sent < this.#lastCounted) return
    this.#lastCounted = performance.now()
    const cause = this.#connectError !== null && /Stream isn't writeable|Connection is closed/.test(err.message) ? this.#connectError : err
    if (++this.#failures < this.#o.fall) {
      this.#log.debug('cluster: Redis command failed; not judged down yet', { redis: this.#o.label, error: cause.message, in_a_row: this.#failures, fall: this.#o.fall })
      return
    }
    if (this.#up === true) this.downs++
    this.#up = false
    this.#answers = 0
    Atomics.store(this.#i32, CLUSTER_BASE + CLH_UP, 0)
    this.#log.error('cluster: Redis unreachable; each node limits to its share (limit ÷ live nodes), failure_mode = "closed" limits refuse, until it is back',
      { redis: this.#o.label, error: cause.message, failed_in_a_row: this.#failures })
  }
}
