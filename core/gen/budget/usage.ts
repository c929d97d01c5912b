// Per-consumer counters of the generation service, read by /metrics at
// scrape time (core/admin/metrics.ts). Labels are bounded: one entry per
// consumer that has a key, and "other" for all the rest (users, addresses,
// requests refused before they had a consumer). Never a key, only names.

import { REJECT_REASONS, type RejectReason } from './ledger.js'

/**
 * Buckets of gen_ai.client.token.usage, in tokens: the OpenTelemetry GenAI
 * semantic conventions' advice (powers of 4 from 1 to 4^13).
 */
export const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864] as const
/** Histogram block: one count per bucket, +Inf, then the sum (the layout core/admin/metrics.ts reads). */
export const TOKEN_SUM = TOKEN_BUCKETS.length + 1

export interface ConsumerUsage {
  /** Requests admitted (run or queued). */
  requests: number
  /** Per-request token counts, prompt ("input") and completion ("output"): bucket counts, +Inf, sum. */
  input: Float64Array
  output: Float64Array
  rejections: Record<RejectReason, number>
}

/** Counts `v` in a histogram block of `buckets` (one count per bucket, +Inf, then the sum). */
export function observe (block: Float64Array, v: number, buckets: readonly number[] = TOKEN_BUCKETS): void {
  let i = 0
  while (i < buckets.length && v > buckets[i]!) i++
  block[i] = block[i]! + 1
  block[buckets.length + 1] = block[buckets.length + 1]! + v
}

export class UsageStats {
  readonly byLabel = new Map<string, ConsumerUsage>()

  constructor (labels: readonly string[]) {
    for (const l of labels) this.byLabel.set(l, this.#empty())
  }

  #empty (): ConsumerUsage {
    const rejections = {} as Record<RejectReason, number>
    for (const r of REJECT_REASONS) rejections[r] = 0
    return { requests: 0, input: new Float64Array(TOKEN_SUM + 1), output: new Float64Array(TOKEN_SUM + 1), rejections }
  }

  #of (label: string): ConsumerUsage {
    let u = this.byLabel.get(label)
    if (u === undefined) {
      u = this.#empty()
      this.byLabel.set(label, u)
    }
    return u
  }

  admitted (label: string): void { this.#of(label).requests++ }
  rejected (label: string, reason: RejectReason): void { this.#of(label).rejections[reason]++ }
  used (label: string, input: number, output: number): void {
    const u = this.#of(label)
    observe(u.input, input)
    observe(u.output, output)
  }
}
