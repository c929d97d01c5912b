// A sliding window's lease (core/cluster/lease-terms.ts): the most own
// window estimate this node may reach, out of the limit (RATE_LEASE).
//
// A waiting entry asks for its estimate plus a chunk (a quarter of limit ÷
// live nodes, so a burst takes a few round trips, not one per request); an
// entry with requests since the last periodic round asks for its estimate
// plus what it grew by since (at least 1, at most a chunk), so a trickle holds
// little the others could use; an idle one for its estimate only, which gives
// back the rest of its lease for the other nodes.
import { CX_LEASE, CX_LIMIT, CX_OTHERS, CX_PERIOD, CX_ROOM, CX_SYNCED, RD_A, RD_B, RD_EXPIRE, RD_SEEN, RD_TICK } from '../shm/layout.js'
import { windowEstimate } from '../shm/rate-table.js'
import type { LeaseRound, LeaseTerms } from './lease-terms.js'
import { RATE_LEASE } from './scripts.js'

// ARGV words per key: floor, want, estimate, limit, key ttl
const FLOOR = 0
const WANT = 1
const EST = 2

export const windowTerms: LeaseTerms = {
  script: RATE_LEASE,
  outWords: 2,

  ask (i32: Int32Array, d: number, x: number, r: LeaseRound, wanted: boolean): number[] | null {
    const period = i32[x + CX_PERIOD]!
    const est = ((r.t - i32[d + RD_EXPIRE]!) | 0) >= 0 ? 0 : windowEstimate(i32[d + RD_TICK]!, i32[d + RD_A]!, i32[d + RD_B]!, r.t, period)
    const lease = i32[x + CX_LEASE]!
    if (!wanted && est === 0 && lease === 0 && i32[x + CX_OTHERS] === 0 && i32[x + CX_SYNCED] === 0) return null
    const limit = i32[x + CX_LIMIT]!
    const chunk = Math.max(1, Math.ceil(limit / (4 * r.nodes)))
    let want = est
    if (wanted) want += chunk
    else if (((i32[d + RD_SEEN]! - r.lastRound) | 0) > 0) want += Math.min(chunk, Math.max(1, est - i32[x + CX_SYNCED]!))
    const floor = Math.min(want, lease)
    i32[x + CX_LEASE] = floor
    return [floor, want, est, limit, 2 * period + r.staleMs]
  },

  grant (i32: Int32Array, _d: number, x: number, _t: number, args: readonly number[], out: readonly number[], at: number): void {
    const grant = out[at] ?? args[FLOOR]!
    i32[x + CX_LEASE] = grant
    i32[x + CX_ROOM] = grant >= args[WANT]! ? 1 : 0
    i32[x + CX_OTHERS] = Math.min(out[at + 1] ?? 0, 0x7fff_ffff)
    i32[x + CX_SYNCED] = args[EST]!
  },
}
