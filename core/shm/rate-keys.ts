// The keys of rate-table entries: two independent 32-bit hashes of a source's
// text, mixed with the seeds of the rate limit it counts for, so every limit
// has its own key space in the shared tables and every node and worker names
// a source alike.

/**
 * Two independent 32-bit hashes of a key string, in one pass (FNV-1a with two
 * offset bases, each finished with murmur3's fmix32). Results are left in
 * `a` and `b` so hashing allocates nothing.
 */
export class KeyHasher {
  a = 0
  b = 0

  hash (s: string): void {
    let a = 0x811c9dc5 | 0
    let b = 0x050c5d1f | 0
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i)
      a = Math.imul(a ^ c, 0x01000193)
      b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15)
    }
    this.a = fmix32(a)
    this.b = fmix32(b ^ s.length)
  }
}

/** murmur3's 32-bit finaliser: every input bit affects every output bit. */
export function fmix32 (h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  return h ^ (h >>> 16)
}

/** A limit's own key space in the shared tables: its seeds, and the owner word of its entries (core/shm/rate-names.ts: never 0, which is unnamed). */
export interface KeySpace { readonly seedA: number, readonly seedB: number, readonly owner: number }

/** The key space named by `label` (a middleware's kind and instance name): the same on every worker and node. */
export function keySpace (label: string): KeySpace {
  const h = new KeyHasher()
  h.hash(label)
  const seedA = h.a
  return { seedA, seedB: fmix32(h.b + 0x9e3779b9), owner: seedA === 0 ? 1 : seedA }
}

/** The table key of a source hash (a, b) within a middleware instance (seeds): KEY_A is never 0. */
export function keyA (a: number, seedA: number): number {
  return fmix32(a ^ seedA) | 1
}

export function keyB (b: number, seedB: number): number {
  return fmix32((b + seedB) | 0)
}
