// The limit a node applies to its own count of a source of a `scope =
// "cluster"` rate limit, from what the control plane last learnt from Redis
// (core/cluster/rate-lease.ts). Called inside the rate table's set lock.
//
// Sliding windows with Redis up hold to a lease (core/cluster/rate-lease.ts):
// the most own estimate this node may reach, granted by Redis out of what the
// other nodes' leases leave of the limit. A source new to this node has a lease
// of 0 and may ask at once (CX_ROOM = 1): its first request waits for one round
// trip. With Redis down, each node keeps limit ÷ live nodes (the last count it
// knew), so the cluster as a whole still admits about `limit`.
//
// Buckets (token and leaky) with Redis up hold to a lease too: a part of the
// capacity (the most level this node's bucket may reach) and a part of the
// rate (what its level drains at), both granted by Redis out of what the
// other nodes' leases leave (core/cluster/bucket-lease.ts). Redis down:
// capacity ÷ nodes, rate ÷ nodes.
import {
  CLH_BELL, CLH_NODES, CLH_UP, CLUSTER_BASE, CX_DRAIN, CX_KA, CX_LEASE, CX_LIMIT, CX_OTHERS, CX_PERIOD, CX_RATE, CX_ROOM, CX_SYNCED, CX_WANT,
} from './layout.js'

/** A bucket's whole rate in CX_RATE's unit: a lease of RATE_PARTS drains at the whole rate. */
export const RATE_PARTS = 1_000_000

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
    i32[x + CX_RATE] = 0
  }
  i32[x + CX_PERIOD] = Math.min(MAX_PERIOD_MS, periodMs)
  i32[x + CX_DRAIN] = drainUs
}

function nodes (i32: Int32Array): number {
  return Math.max(1, i32[CLUSTER_BASE + CLH_NODES]!)
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
 * are at `x`: its lease of the capacity; Redis down, capacity ÷ nodes.
 * `capacity` (units) and `drainPerMs` (units per ms) are the cluster's.
 */
export function clusterCapacity (i32: Int32Array, x: number, ka: number, capacity: number, drainPerMs: number): number {
  // µs per request rounded up: the control plane, which drains levels with it, never drains faster than the workers
  adopt(i32, x, ka, Math.ceil(capacity / drainPerMs), Math.min(0x7fff_ffff, Math.max(1, Math.ceil(1e6 / drainPerMs))))
  i32[x + CX_LIMIT] = capacity
  if (Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 0) return Math.ceil(capacity / nodes(i32))
  return i32[x + CX_LEASE]!
}

/**
 * The part of the rate this node's bucket drains at (0..1): its lease of the
 * rate; Redis down, 1 ÷ nodes. Also read by the control plane, outside the lock.
 */
export function drainShare (i32: Int32Array, x: number): number {
  if (Atomics.load(i32, CLUSTER_BASE + CLH_UP) === 0) return 1 / nodes(i32)
  return i32[x + CX_RATE]! / RATE_PARTS
}
