// A Prometheus histogram whose buckets are counted elsewhere (shared memory,
// the generation service's blocks) and handed to prom-client at scrape time.
import type { Registry } from 'prom-client'
import { TIME_BUCKETS_S, T_SUM } from '../shm/layout.js'

export type Labels = Record<string, string>
type Sample = { labels: Labels, value: number, metricName?: string }

/**
 * A histogram whose buckets already live in shared memory: prom-client's own
 * Histogram only counts observations it sees, so this one hands the registry
 * precomputed cumulative buckets, _sum and _count.
 */
export class ShmHistogram {
  readonly name: string
  readonly help: string
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  readonly #read: () => Array<{ labels: Labels, block: Float64Array }>
  readonly #buckets: readonly number[]
  readonly #sumAt: number

  /** A block holds one count per bucket, the +Inf count, then the sum at `sumAt`. */
  constructor (registry: Registry, name: string, help: string, read: () => Array<{ labels: Labels, block: Float64Array }>,
    buckets: readonly number[] = TIME_BUCKETS_S, sumAt = T_SUM) {
    this.name = name
    this.help = help
    this.#read = read
    this.#buckets = buckets
    this.#sumAt = sumAt
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0])
  }

  get (): { name: string, help: string, type: string, aggregator: string, values: Sample[] } {
    const values: Sample[] = []
    for (const { labels, block } of this.#read()) {
      let cum = 0
      this.#buckets.forEach((le, i) => {
        cum += block[i]!
        values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: String(le) }, value: cum })
      })
      cum += block[this.#buckets.length]!
      values.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: cum })
      values.push({ metricName: `${this.name}_sum`, labels, value: block[this.#sumAt]! })
      values.push({ metricName: `${this.name}_count`, labels, value: cum })
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }

  reset (): void {}
}
