// The limit a node applies to its own count of a source of a `scope =
// "cluster"` rate limit, from what the control plane last learnt from Redis
// (core/cluster/rate-sync.ts). Called inside the rate table's set lock.
//
// With Redis up, the cluster's remaining room at the last sync
// (limit - others - own) is split evenly between the live nodes: each may
// admit its share before the next sync tells it what the others did. Far from
// the limit the share is large and changes nothing; near it, every node slows
// down together, so N nodes admitting at once cannot overshoot by N× (the
// "checked more tightly" rule of docs/cluster.md). With Redis down, each node
// keeps limit ÷ live nodes (the last count it knew), so the cluster as a whole
// still admits about `limit`.
//
// Buckets (token and leaky) count the same way with levels instead of window
// estimates: the cluster's level is the sum of the nodes' levels, its capacity
// is split as above, and each node's level drains at its part of the rate, in
// proportion to its part of the level at the last sync, so the cluster's level
// drains at the whole rate. Redis down: capacity ÷ nodes, rate ÷ nodes.
import { CLH_NODES, CLH_UP, CLUSTER_BASE, CX_DRAIN, CX_KA, CX_OTHERS, CX_PERIOD, CX_SYNCED } from './layout.js'

/** Longest CX_PERIOD (ms): Redis keys expire after twice that, which must stay a sane PEXPIRE. */
const MAX_PERIOD_MS = 7 * 86_400_000

/** The extras at `x` for the entry of KEY_A `ka` (reset when the way changed hands), with what the control plane reads. */
function adopt (i32: Int32Array, x: number, ka: number, periodMs: number, drainUs: number): void {
  if (i32[x + CX_KA] !== ka) {
    // nothing known about this source from the cluster yet
    i32[x + CX_KA] = ka
    i32[x + CX_OTHERS] = 0
    i32[x + CX_SYNCED] = 0
  }
  i32[x + CX_PERIOD] = Math.min(MAX_PERIOD_MS, periodMs)
  i32[x + CX_DRAIN] = drainUs
}

function nodes (i32: Int32Array): number {
  return Math.max(1, i32[CLUSTER_BASE + CLH_NODES]!)
}

/** This node's part of `limit`: what it knew at the last sync plus its share of the room left then; Redis down, limit ÷ nodes. */
function share (i32: Int32Array, x: number, limit: number): number {
  const n = nodes(i32)
  if (Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 0) return Math.ceil(limit / n)
  const synced = i32[x + CX_SYNCED]!
  // rounded up: a source seen by one node only still gets to the limit, at the cost of at most
  // one request per node over it when all nodes meet the limit within the same sync interval
  return synced + Math.ceil((limit - i32[x + CX_OTHERS]! - synced) / n)
}

/** Most own-estimate this node may reach for the sliding-window entry whose extras are at `x` (words of core/shm/layout.ts CX_*). */
export function clusterLimit (i32: Int32Array, x: number, ka: number, periodMs: number, limit: number): number {
  adopt(i32, x, ka, periodMs, 0)
  return share(i32, x, limit)
}

/**
 * Most level (units) this node's bucket may reach for the entry whose extras
 * are at `x`; `capacity` (units) and `drainPerMs` (units per ms) are the
 * cluster's.
 */
export function clusterCapacity (i32: Int32Array, x: number, ka: number, capacity: number, drainPerMs: number): number {
  adopt(i32, x, ka, Math.ceil(capacity / drainPerMs), Math.min(0x7fff_ffff, Math.max(1, Math.round(1e6 / drainPerMs))))
  return share(i32, x, capacity)
}

/**
 * The part of the rate this node's level drains at (0..1): its part of the
 * cluster's level at the last sync, or 1 ÷ nodes when nothing was known
 * (a new source) or Redis is down. Also read by the control plane, outside the lock.
 */
export function drainShare (i32: Int32Array, x: number): number {
  const synced = i32[x + CX_SYNCED]!
  const total = synced + i32[x + CX_OTHERS]!
  if (Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 0 || total <= 0) return 1 / nodes(i32)
  return synced / total
}
