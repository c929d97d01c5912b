// What a lease means for one kind of cluster-scope limit (#38): the
// arithmetic of an entry's ask and of what Redis grants it. The mechanics
// (the bell, the rounds, the set locks, the batches) are one code path for
// every kind, core/cluster/rate-lease.ts; a sliding window's terms are in
// core/cluster/window-lease.ts, a bucket's in core/cluster/bucket-lease.ts.
//
// Both keep the same two rules: a lease only shrinks here first and in Redis
// after, and only grows in Redis first and here after, so Redis always holds
// at least what the workers go by; and a node's floor (what it keeps whatever
// the others hold) is never under what it may already have admitted under.

/** The round an entry is asked about in. */
export interface LeaseRound {
  /** tick (core/clock.ts) of this round */
  readonly t: number
  /** tick at which the last periodic round collected: an entry seen since had requests meanwhile */
  readonly lastRound: number
  /** live nodes, >= 1 */
  readonly nodes: number
  /** node_ttl ms: a node's part in Redis goes stale after it */
  readonly staleMs: number
}

export interface LeaseTerms {
  /** the Lua script of core/cluster/scripts.ts that grants this kind's leases */
  readonly script: string
  /** words per key of the script's answer */
  readonly outWords: number
  /**
   * Under the set's lock: the script's ARGV words for the live entry with data
   * words at `d` and extras at `x` (core/shm/layout.ts RD_*, CX_*), after
   * lowering its lease here to what it asks; `wanted`: a worker waits on it.
   * Null when the entry has nothing to tell (never used, or all given back).
   */
  ask (i32: Int32Array, d: number, x: number, r: LeaseRound, wanted: boolean): number[] | null
  /** Under the set's lock, at tick `t` (after the script answered): writes what it answered (`out` from `at`) for the entry asked with `args`. */
  grant (i32: Int32Array, d: number, x: number, t: number, args: readonly number[], out: readonly number[], at: number): void
}
