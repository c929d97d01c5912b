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

/**
 * How long a request past its node's lease (a cluster rate limit's, or a generation budget's) may wait for lease
 * rounds before it is decided on the lease it has (a refusal), ms, and for each round at most. A round takes one
 * Redis round trip, or fails after max_wait; the request asks again after each one that left it past its lease, so
 * a frozen Redis is judged down (`fall` separate failed commands of max_wait each: past 150 ms with the defaults,
 * more when other commands' failures overlap them and count once) well within the wait, and the local share or counts (or
 * failure_mode = "closed"'s 503) decide instead. A bound on rounds rather than time would run out first: four
 * failed rounds take about 200 ms.
 */
export const LEASE_WAIT_MS = 1000
export const LEASE_ROUND_MS = 250

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
