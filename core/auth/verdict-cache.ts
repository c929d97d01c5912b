// A small bounded cache of successful credential checks, so an expensive
// check (bcrypt, a JWT signature) is not paid on every request. Keys are
// digests of the credentials (never the credentials themselves); values expire
// `ttlMs` after they were stored, or earlier when the caller says so (a JWT's
// exp). When full, the oldest insertion goes (Map keeps insertion order), so
// the cache never grows past `max`. Only successes are stored: a failure is
// never served from here, and changed users or keys take effect with the
// next config generation, which builds a new cache.

interface Slot<V> {
  value: V
  /** tick after which the entry is stale */
  expires: number
}

export class VerdictCache<V> {
  readonly #map = new Map<string, Slot<V>>()
  readonly max: number
  readonly ttlMs: number

  constructor (max: number, ttlMs: number) {
    this.max = max
    this.ttlMs = ttlMs
  }

  get size (): number { return this.#map.size }

  get (key: string, now: number): V | undefined {
    const s = this.#map.get(key)
    if (s === undefined) return undefined
    if (((now - s.expires) | 0) >= 0) {
      this.#map.delete(key)
      return undefined
    }
    return s.value
  }

  set (key: string, value: V, now: number, ttlMs = this.ttlMs): void {
    if (this.max === 0 || ttlMs <= 0) return
    if (this.#map.has(key)) this.#map.delete(key)
    else if (this.#map.size >= this.max) this.#map.delete(this.#map.keys().next().value!)
    this.#map.set(key, { value, expires: (now + Math.min(ttlMs, this.ttlMs)) | 0 })
  }
}
