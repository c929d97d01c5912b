// A small seeded PRNG (mulberry32) and the choices the generators make with
// it. Every case of the campaign is built from its own 32-bit seed alone, so
// a failing case is reproduced by its seed (LB_FUZZ_SEED, LB_FUZZ_ONLY).

/** FNV-1a of `text`: the seed of one case from the campaign seed, its surface and its index. */
export function seedOf (text: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return h >>> 0
}

export class Rng {
  #s: number
  constructor (seed: number) { this.#s = seed >>> 0 }

  /** uniform 32-bit unsigned */
  u32 (): number {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0
    let t = this.#s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (t ^ (t >>> 14)) >>> 0
  }

  /** integer in [0, n) */
  int (n: number): number { return n <= 1 ? 0 : this.u32() % n }
  /** integer in [lo, hi] */
  range (lo: number, hi: number): number { return lo + this.int(hi - lo + 1) }
  chance (p: number): boolean { return this.u32() / 2 ** 32 < p }
  pick<T> (xs: readonly T[]): T { return xs[this.int(xs.length)]! }
  bytes (n: number): Buffer {
    const b = Buffer.alloc(n)
    for (let i = 0; i < n; i++) b[i] = this.int(256)
    return b
  }

  /** a short string of printable ASCII */
  word (max = 12): string {
    let s = ''
    for (let i = this.range(1, max); i > 0; i--) s += String.fromCharCode(this.range(0x21, 0x7e))
    return s
  }

  /** an integer that is often at a boundary: 0, ±1, powers of two, 2^31, 2^53, or small */
  edgeInt (): number {
    const e = [0, 1, -1, 2, 255, 256, 65535, 65536, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53, -(2 ** 53), 1e21]
    return this.chance(0.6) ? this.pick(e) : this.range(-1000, 100_000)
  }
}
