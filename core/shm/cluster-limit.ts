// The limit a node applies to its own count of a source of a `scope =
// "cluster"` rate limit, from what the control plane last learnt from Redis
// (core/cluster/rate-sync.ts). Called inside the rate table's set lock.
//
// Sliding windows with Redis up hold to a lease (core/cluster/rate-lease.ts):
// the most own estimate this node may reach, granted by Redis out of what the
// other nodes' leases leave of the limit. A source new to this node has a lease
// of 0 and may ask at once (CX_ROOM = 1): its first request waits for one round
// trip. With Redis down, each node keeps limit ÷ live nodes (the last count it
// knew), so the cluster as a whole still admits about `limit`.
//
// Buckets (token and leaky), with Redis up: the cluster's level is the sum of
// the nodes' levels, and the room left at the last sync (capacity - others -
// own) is split evenly between the live nodes: each may admit its share before
// the next sync tells it what the others did; near the capacity every node
// slows down together (the "checked more tightly" rule of docs/cluster.md).
// Each node's level drains at its part of the rate, in
// proportion to its part of the level at the last sync, so the cluster's level
// drains at the whole rate. Redis down: capacity ÷ nodes, rate ÷ nodes.
import { CLH_BELL, CLH_NODES, CLH_UP, CLUSTER_BASE, CX_DRAIN, CX_KA, CX_LEASE, CX_LIMIT, CX_OTHERS, CX_PERIOD, CX_ROOM, CX_SYNCED, CX_WANT } from './layout.js'

/** Longest CX_PERIOD (ms): Redis keys expire after twice that, which must stay a sane PEXPIRE. */
const MAX_PERIOD_MS = 7 * 86_400_000

/** The extras at `x` for the entry of KEY_A `ka` (reset when the way changed hands), with what the control plane reads. */
function adopt (i32: Int32Array, x: number, ka: number, periodMs: number, drainUs: number): void {
  if (i32[x + CX_KA] !== ka) {
    // nothing known about this source from the cluster yet
    i32[x + CX_KA] = ka
    i32[x + CX_OTHERS] = 0
    i32[x + CX_SYNCED] = 0
    i32[x + CX_LEASE] = 0
    i32[x + CX_ROOM] = 1
    i32[x + CX_WANT] = 0
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

/**
 * Most own-estimate this node may reach for the sliding-window entry whose
 * extras are at `x` (words of core/shm/layout.ts CX_*): its lease; Redis down,
 * limit ÷ nodes.
 */
export function clusterLimit (i32: Int32Array, x: number, ka: number, periodMs: number, limit: number): number {
  adopt(i32, x, ka, periodMs, 0)
  i32[x + CX_LIMIT] = limit
  if (Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 0) return Math.ceil(limit / nodes(i32))
  return i32[x + CX_LEASE]!
}

/** True while sliding windows hold to their leases: Redis up. */
export function onLease (i32: Int32Array): boolean {
  return Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 1
}

/**
 * Past its lease, may this node ask Redis for more (Redis up, and the last
 * grant was all it asked)? Then marks the entry as waiting and rings the
 * control plane's bell; the caller waits for the next CLH_GRANTS.
 */
export function askLease (i32: Int32Array, x: number): boolean {
  if (Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 0 || i32[x + CX_ROOM] !== 1) return false
  i32[x + CX_WANT] = 1
  Atomics.add(i32, CLUSTER_BASE + CLH_BELL, 1)
  Atomics.notify(i32, CLUSTER_BASE + CLH_BELL)
  return true
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
