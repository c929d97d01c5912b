// The limit a node applies to its own sliding-window estimate of a source of a
// `scope = "cluster"` rate limit, from what the control plane last learnt from
// Redis (core/cluster/rate-sync.ts). Called inside the rate table's set lock.
//
// With Redis up, the cluster's remaining room at the last sync
// (limit - others - own) is split evenly between the live nodes: each may
// admit its share before the next sync tells it what the others did. Far from
// the limit the share is large and changes nothing; near it, every node slows
// down together, so N nodes admitting at once cannot overshoot by N× (the
// "checked more tightly" rule of docs/cluster.md). With Redis down, each node
// keeps limit ÷ live nodes (the last count it knew), so the cluster as a whole
// still admits about `limit`.
import { CLH_NODES, CLH_UP, CLUSTER_BASE, CX_KA, CX_OTHERS, CX_PERIOD, CX_SYNCED } from './layout.js'

/** Most own-estimate this node may reach for the entry whose extras are at `x` (words of core/shm/layout.ts CX_*). */
export function clusterLimit (i32: Int32Array, x: number, ka: number, periodMs: number, limit: number): number {
  const nodes = Math.max(1, i32[CLUSTER_BASE + CLH_NODES]!)
  if (i32[x + CX_KA] !== ka) {
    // the way changed hands: nothing known about this source from the cluster yet
    i32[x + CX_KA] = ka
    i32[x + CX_OTHERS] = 0
    i32[x + CX_SYNCED] = 0
  }
  i32[x + CX_PERIOD] = periodMs
  if (Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 0) return Math.ceil(limit / nodes)
  const synced = i32[x + CX_SYNCED]!
  // rounded up: a source seen by one node only still gets to the limit, at the cost of at most
  // one request per node over it when all nodes meet the limit within the same sync interval
  return synced + Math.ceil((limit - i32[x + CX_OTHERS]! - synced) / nodes)
}
