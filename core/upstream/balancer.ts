// A balancer picks one server of a group for a request. Groups are per worker,
// but all state a pick depends on (usability, weights, in-flight counts, the
// cursor) lives in shared memory, so every worker balances as one.
import type { Shm } from '../shm/layout.js'
import type { Balance } from '../config/dynamic.js'
import { LeastConn } from './least-conn.js'
import { RoundRobin } from './round-robin.js'
import { SourceHash } from './source-hash.js'

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

export function createBalancer (kind: Balance, shm: Shm, serviceSlot: number, servers: readonly BalancerServer[]): Balancer {
  switch (kind) {
    case 'roundrobin': return new RoundRobin(shm.i32, serviceSlot, servers)
    case 'leastconn': return new LeastConn(shm, serviceSlot, servers)
    case 'source': return new SourceHash(shm.i32, servers)
    default: {
      const never: never = kind
      throw new Error(`unknown balance ${String(never)}`)
    }
  }
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
