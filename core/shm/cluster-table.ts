// The cluster rate table as the data plane sees it: the second rate table of
// the cluster region (core/shm/layout.ts), present only with [cluster].
import { CLH_GRANTS, CLH_REFUSED_CLUSTER, CLH_REFUSED_LOCAL, CLH_UNAVAILABLE, CLH_UP, CLUSTER_BASE, CLUSTER_EXTRA, CLUSTER_NAMES, CLUSTER_SETS, CLUSTER_TABLE } from './layout.js'
import { RateTable } from './rate-table.js'

export interface ClusterTable {
  readonly table: RateTable
  /** word offset of the extras, the `cx` argument of RateTable.window */
  readonly cx: number
}

/** The cluster rate table of the shared memory `i32`, or null when lb runs without [cluster]. */
export function clusterTable (i32: Int32Array): ClusterTable | null {
  return CLUSTER_SETS === 0 ? null : { table: new RateTable(i32, CLUSTER_TABLE, CLUSTER_SETS, CLUSTER_NAMES), cx: CLUSTER_EXTRA }
}

/** Counts a 429 of a cluster-scope limit as decided with the cluster's counts or on the local share (Redis down). */
export function countClusterRefusal (i32: Int32Array): void {
  Atomics.add(i32, CLUSTER_BASE + (Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 1 ? CLH_REFUSED_CLUSTER : CLH_REFUSED_LOCAL), 1)
}

/**
 * True while this node judges Redis down (core/cluster/health.ts), or has not
 * reached it yet: what a failure_mode = "closed" limit refuses on.
 */
export function clusterDown (i32: Int32Array): boolean {
  return Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 0
}

/** Counts a 503 of a failure_mode = "closed" limit. */
export function countUnavailable (i32: Int32Array): void {
  Atomics.add(i32, CLUSTER_BASE + CLH_UNAVAILABLE, 1)
}

/** The count of lease rounds done (core/cluster/rate-lease.ts): read before a window() call that may answer ASK_LEASE. */
export function leaseRounds (i32: Int32Array): number {
  return Atomics.load(i32, CLUSTER_BASE + CLH_GRANTS)
}

type WaitAsync = (a: Int32Array, i: number, v: number, ms: number) => { async: boolean, value: unknown }
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync

/** Resolves once a lease round ends after `seen` (leaseRounds' value), or after `ms`. Off the hot path: allocates. */
export async function nextLeaseRound (i32: Int32Array, seen: number, ms: number): Promise<void> {
  const w = waitAsync(i32, CLUSTER_BASE + CLH_GRANTS, seen, ms)
  if (w.async) await w.value
}
