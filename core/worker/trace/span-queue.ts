// A worker's spans waiting for export: a ring of fixed capacity, allocated
// once (and again only when a reload changes max_queue_spans). push() refuses
// a span when the ring is full: the caller counts it dropped, so memory stays
// bounded whatever the collector does (OpenTelemetry's batch processor drops
// the newest too).
import type { Span } from './span.js'

export class SpanQueue {
  #ring: Array<Span | null>
  /** index of the oldest span */
  #head = 0
  #size = 0

  constructor (capacity: number) {
    this.#ring = new Array<Span | null>(capacity).fill(null)
  }

  get size (): number { return this.#size }
  get capacity (): number { return this.#ring.length }

  /** false when full (the span is not kept) */
  push (s: Span): boolean {
    const ring = this.#ring
    if (this.#size === ring.length) return false
    ring[(this.#head + this.#size) % ring.length] = s
    this.#size++
    return true
  }

  /** Up to `n` of the oldest spans, taken out. */
  take (n: number): Span[] {
    const ring = this.#ring
    const k = Math.min(n, this.#size)
    const out = new Array<Span>(k)
    for (let i = 0; i < k; i++) {
      out[i] = ring[this.#head]!
      ring[this.#head] = null
      this.#head = (this.#head + 1) % ring.length
    }
    this.#size -= k
    return out
  }

  /** A new capacity, keeping the oldest spans that fit; returns how many did not. */
  resize (capacity: number): number {
    if (capacity === this.#ring.length) return 0
    const kept = this.take(capacity)
    const lost = this.#size
    this.#ring = new Array<Span | null>(capacity).fill(null)
    this.#head = 0
    this.#size = 0
    for (const s of kept) this.push(s)
    return lost
  }
}
