// A bucket's lease (core/cluster/lease-terms.ts): two parts, both granted by
// Redis (BUCKET_LEASE) out of what the other nodes' leases leave:
//
//   capacity  the most level (units, 1/1000 request) this node's bucket may
//             reach; the nodes' parts never sum past the bucket's capacity
//   rate      what this node's level drains at, in RATE_PARTS of the whole
//             rate; the nodes' parts never sum past the whole rate
//
// So the sum of the nodes' levels never drains faster than one bucket's level
// fed the same requests, and never passes the capacity: the nodes together
// admit no request one bucket would have refused (the bound, docs/cluster.md).
//
// Capacity is asked as a sliding window's lease is: a waiting entry asks for
// its level plus a chunk (a quarter of capacity ÷ live nodes), an entry with
// requests since the last periodic round for its level plus what it grew by
// (at least one request, at most a chunk), an idle one for its level only,
// giving back the rest. The rate follows the levels: each node asks for its
// part of the cluster's level (Redis works it out from the levels it holds),
// so the levels drain to 0 together and no rate sits on an empty bucket while
// another is full.
//
// The workers drain a level lazily, from its tick at the rate of the moment;
// a change of rate therefore first drains the level to now at the old rate,
// so that the new one never applies to the time before it.
import { RATE_PARTS, drainShare } from '../shm/cluster-limit.js'
import { CX_DRAIN, CX_LEASE, CX_LIMIT, CX_OTHERS, CX_PERIOD, CX_RATE, CX_ROOM, CX_SYNCED, RD_A, RD_EXPIRE, RD_SEEN, RD_TICK } from '../shm/layout.js'
import { MILLI } from '../shm/rate-table.js'
import type { LeaseRound, LeaseTerms } from './lease-terms.js'
import { BUCKET_LEASE } from './scripts.js'

// ARGV words per key: capacity floor, capacity want, level, capacity, rate floor, key ttl
const FLOOR = 0
const WANT = 1
const LEVEL = 2
const RATE_FLOOR = 4

/**
 * The level (units, rounded up) at tick `t` of the bucket with data words at
 * `d`, extras at `x`: drained at this node's part of the whole rate (CX_DRAIN
 * is rounded up, so this never drains faster than the workers do).
 */
export function levelAt (i32: Int32Array, d: number, x: number, t: number): number {
  if (((t - i32[d + RD_EXPIRE]!) | 0) >= 0) return 0
  const elapsed = Math.max(0, (t - i32[d + RD_TICK]!) | 0)
  return Math.max(0, Math.ceil(i32[d + RD_A]! - (elapsed * 1e6 * drainShare(i32, x)) / i32[x + CX_DRAIN]!))
}

/** Sets this node's part of the rate to `rate`, the level first drained to `t` at the part it had. */
function setRate (i32: Int32Array, d: number, x: number, t: number, rate: number): void {
  if (i32[x + CX_RATE] === rate) return
  // a worker whose clock runs ahead may have moved the tick past t: its level is as of then already
  if (((t - i32[d + RD_TICK]!) | 0) > 0) {
    i32[d + RD_A] = levelAt(i32, d, x, t)
    i32[d + RD_TICK] = t
  }
  i32[x + CX_RATE] = rate
}

export const bucketTerms: LeaseTerms = {
  script: BUCKET_LEASE,
  outWords: 3,

  ask (i32: Int32Array, d: number, x: number, r: LeaseRound, wanted: boolean): number[] | null {
    const level = levelAt(i32, d, x, r.t)
    const lease = i32[x + CX_LEASE]!
    const rate = i32[x + CX_RATE]!
    const others = i32[x + CX_OTHERS]!
    if (!wanted && level === 0 && lease === 0 && rate === 0 && others === 0 && i32[x + CX_SYNCED] === 0) return null
    const capacity = i32[x + CX_LIMIT]!
    const chunk = Math.max(1, Math.ceil(capacity / (MILLI * 4 * r.nodes))) * MILLI
    // a waiting request counts in the level it asks on: it is there once granted
    const basis = wanted ? level + MILLI : level
    let want = level
    if (wanted) want += chunk
    else if (((i32[d + RD_SEEN]! - r.lastRound) | 0) > 0) want += Math.min(chunk, Math.max(MILLI, level - i32[x + CX_SYNCED]!))
    const floor = Math.min(want, lease)
    // its part of the levels known at the last round, never more than it holds until Redis grants it
    const rateFloor = Math.min(rate, basis + others > 0 ? Math.floor((RATE_PARTS * basis) / (basis + others)) : 0)
    i32[x + CX_LEASE] = floor
    setRate(i32, d, x, r.t, rateFloor)
    return [floor, want, basis, capacity, rateFloor, 2 * i32[x + CX_PERIOD]! + r.staleMs]
  },

  grant (i32: Int32Array, d: number, x: number, t: number, args: readonly number[], out: readonly number[], at: number): void {
    const grant = out[at] ?? args[FLOOR]!
    i32[x + CX_LEASE] = grant
    i32[x + CX_ROOM] = grant >= args[WANT]! ? 1 : 0
    i32[x + CX_OTHERS] = Math.min(out[at + 2] ?? 0, 0x7fff_ffff) // levels of many nodes may pass an Int32
    i32[x + CX_SYNCED] = args[LEVEL]!
    setRate(i32, d, x, t, out[at + 1] ?? args[RATE_FLOOR]!)
  },
}
