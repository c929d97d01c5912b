// What every balancing strategy implements, and the hashes they share. Its own
// module so that the strategies (round-robin.ts, least-conn.ts, source-hash.ts)
// and the factory that picks one (balancer.ts) do not import each other.

export interface BalancerServer {
  /** shared-memory slot of the server */
  readonly slot: number
  /** stable identity for hashing: the server's address */
  readonly key: string
}

export interface Balancer {
  /**
   * Index into the group of the server to use, or -1 when none is usable.
   * `clientHash` is the client address hash (used by `source` only);
   * `exclude` is an index to avoid (a server that just failed), or -1.
   */
  pick (now: number, clientHash: number, exclude: number): number
}

/** FNV-1a over a string's UTF-16 code units, then a murmur3 finaliser: a 32-bit hash identical in every thread and run. */
export function hash32 (s: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return mix32(h)
}

export function mix32 (h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}
