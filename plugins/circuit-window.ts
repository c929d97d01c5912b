// The measures a circuitBreaker decides on: the requests that passed it over
// the last WINDOW_S seconds, in one-second buckets (as oxy's rolling counters):
// how many, how many lb answered itself because the server failed (network
// errors), how many per status, and a histogram of the time to the response.
// One window per breaker per worker, as Traefik keeps one per instance.
import type { Measures } from './circuit-expression.js'

export const WINDOW_S = 10
/** latency histogram upper bounds, ms (the last bucket is everything above) */
const BOUNDS = [1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 10_000, 30_000, 60_000]

export class CircuitWindow implements Measures {
  #second = -1
  readonly #total = new Float64Array(WINDOW_S)
  readonly #network = new Float64Array(WINDOW_S)
  /** per bucket, the count per status 100-599 */
  readonly #status = Array.from({ length: WINDOW_S }, () => new Float64Array(500))
  readonly #latency = Array.from({ length: WINDOW_S }, () => new Float64Array(BOUNDS.length + 1))

  /** Counts one request that ended at `nowMs` (wall ms). */
  record (nowMs: number, status: number, networkError: boolean, latencyMs: number): void {
    const b = this.#advance(nowMs)
    this.#total[b]!++
    if (networkError) this.#network[b]!++
    if (status >= 100 && status < 600) this.#status[b]![status - 100]!++
    let k = 0
    while (k < BOUNDS.length && latencyMs > BOUNDS[k]!) k++
    this.#latency[b]![k]!++
  }

  /** Drops everything (a breaker that trips or recovers starts over). */
  reset (): void {
    this.#total.fill(0)
    this.#network.fill(0)
    for (const s of this.#status) s.fill(0)
    for (const l of this.#latency) l.fill(0)
  }

  /** Brings the window to `nowMs` (buckets of seconds that passed are emptied); the bucket of now. */
  #advance (nowMs: number): number {
    const sec = Math.floor(nowMs / 1000)
    if (this.#second < 0 || sec - this.#second >= WINDOW_S) {
      if (this.#second >= 0) this.reset()
    } else {
      for (let s = this.#second + 1; s <= sec; s++) this.#clear(s % WINDOW_S)
    }
    if (sec > this.#second) this.#second = sec
    return sec % WINDOW_S
  }

  #clear (b: number): void {
    this.#total[b] = 0
    this.#network[b] = 0
    this.#status[b]!.fill(0)
    this.#latency[b]!.fill(0)
  }

  /** Brings the window to now before an evaluation. */
  at (nowMs: number): this {
    this.#advance(nowMs)
    return this
  }

  networkErrorRatio (): number {
    const t = sum(this.#total)
    return t === 0 ? 0 : sum(this.#network) / t
  }

  responseCodeRatio (from: number, to: number, dFrom: number, dTo: number): number {
    const d = this.#codes(dFrom, dTo)
    return d === 0 ? 0 : this.#codes(from, to) / d
  }

  latencyAtQuantileMs (q: number): number {
    const h = new Float64Array(BOUNDS.length + 1)
    for (const l of this.#latency) for (let k = 0; k < h.length; k++) h[k]! += l[k]!
    const n = sum(h)
    if (n === 0) return 0
    const want = (q / 100) * n
    let seen = 0
    for (let k = 0; k < h.length; k++) {
      seen += h[k]!
      if (seen >= want) return k < BOUNDS.length ? BOUNDS[k]! : BOUNDS[BOUNDS.length - 1]! * 2
    }
    return 0
  }

  #codes (from: number, to: number): number {
    let n = 0
    for (const s of this.#status) for (let c = Math.max(100, from); c < Math.min(600, to); c++) n += s[c - 100]!
    return n
  }
}

function sum (a: Float64Array): number {
  let n = 0
  for (const x of a) n += x
  return n
}
