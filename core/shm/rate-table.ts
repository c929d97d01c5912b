// The shared rate-limit table: fixed slots of integers in the SharedArrayBuffer,
// so a limit holds exactly across all workers (HAProxy's stick table with
// freq_ctr counters; nginx's limit_req zone; Traefik's token bucket).
//
// Set-associative open addressing: a key (two independent 32-bit hashes) maps
// to one set of RATE_WAYS entries. A hit takes the set's lock word with
// Atomics.compareExchange, finds the key among the ways (or claims a way: a
// never-used one first, then an expired one, then the least recently used),
// updates the entry's counters and releases the lock with Atomics.store. The
// critical section is a few dozen integer operations with no allocation and no
// call out (core/shm/shm-lock.ts).
//
// The table never grows, never blocks for more than a critical section (or
// STALE_LOCK_MS after a worker died inside one) and never throws: a full set
// evicts. Expired-first then LRU eviction is per set (as in a CPU cache), which
// approximates a global LRU closely when keys hash evenly.
//
// Units: ticks are wrapping milliseconds (core/clock.ts now()), compared with
// ((a - b) | 0). Bucket levels are in 1/1000 of a request (nginx's "excess").
import { askLease, clusterCapacity, clusterLimit, drainShare, onLease } from './cluster-limit.js'
import {
  CX_KA, CX_OTHERS, CX_SYNCED, CX_WORDS, RATE_BASE, RATE_DATA_WORDS, RATE_NAMES, RATE_SET_WORDS, RATE_SETS, RATE_WAYS,
  RD_A, RD_B, RD_EXPIRE, RD_SEEN, RD_TICK, RS_DATA, RS_KEY_A, RS_KEY_B, RS_LOCK,
} from './layout.js'
import { writeName } from './rate-names.js'
import { lock } from './shm-lock.js'

export { KeyHasher, type KeySpace, fmix32, keyA, keyB, keySpace } from './rate-keys.js'

/**
 * window()'s and bucket()'s answer when the request is neither admitted nor
 * counted: wait for a bigger lease (CLH_GRANTS), then call again. Neither a
 * wait (negative, at most about 6e10 ms) nor a level (>= 0).
 */
export const ASK_LEASE = Number.MIN_SAFE_INTEGER

/** One request = 1000 units of bucket level. */
export const MILLI = 1000

export class RateTable {
  readonly i32: Int32Array
  readonly base: number
  readonly sets: number
  /** word offset of the ways' names (core/shm/rate-names.ts), -1 = none kept */
  readonly names: number

  /** The shared table in `i32` (default: the region of core/shm/layout.ts); tests may pass a small one, without names. */
  constructor (i32: Int32Array, base = RATE_BASE, sets = RATE_SETS, names = base === RATE_BASE ? RATE_NAMES : -1) {
    this.i32 = i32
    this.base = base
    this.sets = sets
    this.names = names
  }

  /** Word offset of the set holding a key whose second hash is `kb`. */
  setOf (kb: number): number {
    return this.base + ((kb >>> 0) % this.sets) * RATE_SET_WORDS
  }

  /**
   * Sliding window (HAProxy freq_ctr over `periodMs`): every request is
   * counted, refused ones too, as `http-request track-sc0` does; a request is
   * refused when the estimate including it exceeds `limit`. The estimate is
   * curr + prev × (share of the previous window still inside the sliding one).
   * Returns 0 (accepted) or -wait: ms until a request would be accepted again.
   * With `cx` (the cluster table's extras, core/shm/layout.ts CLUSTER_EXTRA),
   * `limit` is the cluster's and this node's part of it comes from clusterLimit.
   * `owner` (the limit's seed, non-zero) and `key` (the source as text) name
   * an entry this call claims, for the management surfaces; 0 leaves it unnamed.
   * With `ask`, a request past this node's lease that may ask Redis for more
   * is not counted and the answer is ASK_LEASE.
   */
  window (ka: number, kb: number, now: number, periodMs: number, limit: number, ttlMs: number, cx = -1, owner = 0, key = '', ask = false): number {
    const i32 = this.i32
    const set = this.setOf(kb)
    lock(i32, set + RS_LOCK)
    const d = this.#claim(set, ka, kb, now, owner, key)
    let elapsed = (now - i32[d + RD_TICK]!) | 0
    if (elapsed < 0) elapsed = 0 // another worker's clock ran a few ms ahead
    if (elapsed >= periodMs) {
      // rotate: the current window becomes the previous one, or both reset after a full idle period
      if (elapsed < 2 * periodMs) {
        i32[d + RD_B] = i32[d + RD_A]!
        i32[d + RD_TICK] = (i32[d + RD_TICK]! + periodMs) | 0
      } else {
        i32[d + RD_B] = 0
        i32[d + RD_TICK] = now
      }
      i32[d + RD_A] = 0
      elapsed = (now - i32[d + RD_TICK]!) | 0
    }
    const prev = i32[d + RD_B]!
    const curr = i32[d + RD_A]! + 1
    const est = curr + Math.floor((prev * (periodMs - elapsed)) / periodMs)
    const x = cx >= 0 ? this.#extras(cx, set, d) : -1
    if (x >= 0) limit = clusterLimit(i32, x, ka, periodMs, limit)
    // past this node's lease (Redis up): ask for more, else refuse without counting, since a counted
    // refusal would spend lease the cluster granted for admitted requests (core/cluster/rate-lease.ts)
    const leased = x >= 0 && est > limit && onLease(i32)
    if (leased && ask && askLease(i32, x)) {
      // not counted: it is decided again once the control plane has asked Redis
      i32[d + RD_SEEN] = now
      i32[d + RD_EXPIRE] = (now + ttlMs) | 0
      Atomics.store(i32, set + RS_LOCK, 0)
      return ASK_LEASE
    }
    if (!leased && curr < 0x7fff_ffff) i32[d + RD_A] = curr
    let result = 0
    if (est > limit) {
      // earliest time a new request's estimate is back within the limit
      let wait: number
      if (prev > 0 && curr < limit) wait = Math.ceil(periodMs - ((limit - 1 - curr) * periodMs) / prev) - elapsed
      else wait = periodMs - elapsed + (curr >= limit ? Math.ceil((periodMs * (curr - limit + 1)) / curr) : 0)
      result = -Math.min(periodMs, Math.max(1, wait))
    }
    i32[d + RD_SEEN] = now
    i32[d + RD_EXPIRE] = (now + ttlMs) | 0
    Atomics.store(i32, set + RS_LOCK, 0)
    return result
  }

  /**
   * Bucket (nginx limit_req's leaky bucket; Traefik's token bucket is the same
   * with the level counting spent tokens). The level drains by `drainPerMs`
   * units per ms; a request adds MILLI and is accepted while the level stays
   * within `capacity` units. A refused request leaves the entry as it was
   * (nginx and x/time/rate do not count refusals). Returns the level above one
   * request after this one (>= 0, in units; nginx's delay is that / drainPerMs)
   * when accepted, or -wait in ms (<= -1) when refused. With `cx` (as in
   * window()), capacity and drain are the cluster's, and this node's parts of
   * them come from core/shm/cluster-limit.ts (its leases, Redis up); the wait
   * is then a lower bound. With `ask`, a request past this node's lease that
   * may ask Redis for more is answered ASK_LEASE. `owner` and `key` as in window().
   */
  bucket (ka: number, kb: number, now: number, capacity: number, drainPerMs: number, ttlMs: number, cx = -1, owner = 0, key = '', ask = false): number {
    const i32 = this.i32
    const set = this.setOf(kb)
    lock(i32, set + RS_LOCK)
    const d = this.#claim(set, ka, kb, now, owner, key)
    let drain = drainPerMs
    const x = cx >= 0 ? this.#extras(cx, set, d) : -1
    if (x >= 0) {
      capacity = clusterCapacity(i32, x, ka, capacity, drainPerMs)
      drain *= drainShare(i32, x)
    }
    let elapsed = (now - i32[d + RD_TICK]!) | 0
    if (elapsed < 0) elapsed = 0
    let level = i32[d + RD_A]! - elapsed * drain
    if (level < 0) level = 0
    level += MILLI
    let result: number
    if (level > capacity) {
      // past this node's lease (Redis up): the request is decided again once the control plane has asked Redis
      result = x >= 0 && ask && askLease(i32, x) ? ASK_LEASE : -Math.max(1, Math.ceil((level - capacity) / drainPerMs))
    } else {
      // fractions of a unit are dropped: at most 1/1000 request per accepted request
      i32[d + RD_A] = level
      i32[d + RD_TICK] = now
      result = level - MILLI
    }
    i32[d + RD_SEEN] = now
    i32[d + RD_EXPIRE] = (now + ttlMs) | 0
    Atomics.store(i32, set + RS_LOCK, 0)
    return result
  }

  /**
   * Requests in flight per key (inFlightReq; Traefik's counter, exact across
   * workers): +1 when the count is below `limit` (returns 1), else nothing
   * (returns 0). The entry lives `ttlMs` past its last change (a process killed
   * with requests in flight leaks them no longer than that).
   */
  acquire (ka: number, kb: number, now: number, limit: number, ttlMs: number, owner = 0, key = ''): number {
    const i32 = this.i32
    const set = this.setOf(kb)
    lock(i32, set + RS_LOCK)
    const d = this.#claim(set, ka, kb, now, owner, key)
    const n = i32[d + RD_A]!
    const ok = n < limit
    if (ok) i32[d + RD_A] = n + 1
    i32[d + RD_SEEN] = now
    i32[d + RD_EXPIRE] = (now + ttlMs) | 0
    Atomics.store(i32, set + RS_LOCK, 0)
    return ok ? 1 : 0
  }

  /** Gives back what acquire() took; an entry gone meanwhile (evicted, expired, cleared) is left alone. At 0 the way is free at once. */
  release (ka: number, kb: number, now: number): void {
    const i32 = this.i32
    const set = this.setOf(kb)
    lock(i32, set + RS_LOCK)
    for (let w = 0; w < RATE_WAYS; w++) {
      if (i32[set + RS_KEY_A + w] !== ka || i32[set + RS_KEY_B + w] !== kb) continue
      const d = set + RS_DATA + w * RATE_DATA_WORDS
      const n = i32[d + RD_A]! - 1
      i32[d + RD_A] = n > 0 ? n : 0
      if (n <= 0) i32[d + RD_EXPIRE] = now
      break
    }
    Atomics.store(i32, set + RS_LOCK, 0)
  }

  /**
   * The data words of (ka, kb) in `set` (locked), claiming a way when the key
   * is absent: never used, else expired, else least recently seen. A claimed
   * way, or an expired one of the same key, starts empty with its algorithm
   * tick at `now`, and is named `owner`, `key`.
   */
  #claim (set: number, ka: number, kb: number, now: number, owner: number, key: string): number {
    const i32 = this.i32
    let way = -1
    for (let w = 0; w < RATE_WAYS; w++) {
      if (i32[set + RS_KEY_A + w] === ka && i32[set + RS_KEY_B + w] === kb) {
        way = w
        break
      }
    }
    if (way >= 0) {
      const d = set + RS_DATA + way * RATE_DATA_WORDS
      // an expired way of the same key starts over: its ticks may be too old to compare
      if (((now - i32[d + RD_EXPIRE]!) | 0) >= 0) reset(i32, d, now)
      return d
    }
    let free = -1
    let expired = -1
    let lru = 0
    let lruAge = -1
    for (let w = 0; w < RATE_WAYS; w++) {
      if (i32[set + RS_KEY_A + w] === 0) {
        free = w
        break
      }
      const d = set + RS_DATA + w * RATE_DATA_WORDS
      if (((now - i32[d + RD_EXPIRE]!) | 0) >= 0) {
        if (expired < 0) expired = w
        continue
      }
      const age = (now - i32[d + RD_SEEN]!) | 0
      if (age > lruAge) {
        lruAge = age
        lru = w
      }
    }
    way = free >= 0 ? free : expired >= 0 ? expired : lru
    i32[set + RS_KEY_A + way] = ka
    i32[set + RS_KEY_B + way] = kb
    if (this.names >= 0) writeName(i32, this.names, ((set - this.base) / RATE_SET_WORDS) * RATE_WAYS + way, owner, key)
    const d = set + RS_DATA + way * RATE_DATA_WORDS
    reset(i32, d, now)
    return d
  }

  /**
   * Forgets the entry of (ka, kb), as if its source had never come: the way is
   * free again (and, with `cx`, its cluster extras are dropped). HAProxy's
   * `clear table <t> key <k>`. False when there was no such entry.
   */
  clear (ka: number, kb: number, cx = -1): boolean {
    const i32 = this.i32
    const set = this.setOf(kb)
    lock(i32, set + RS_LOCK)
    let found = false
    for (let w = 0; w < RATE_WAYS; w++) {
      if (i32[set + RS_KEY_A + w] !== ka || i32[set + RS_KEY_B + w] !== kb) continue
      i32[set + RS_KEY_A + w] = 0
      i32[set + RS_KEY_B + w] = 0
      const way = ((set - this.base) / RATE_SET_WORDS) * RATE_WAYS + w
      if (this.names >= 0) writeName(i32, this.names, way, 0, '')
      if (cx >= 0) {
        const x = cx + way * CX_WORDS
        i32[x + CX_KA] = 0
        i32[x + CX_OTHERS] = 0
        i32[x + CX_SYNCED] = 0
      }
      found = true
      break
    }
    Atomics.store(i32, set + RS_LOCK, 0)
    return found
  }

  /** Word offset of the cluster extras (from `cx`, core/shm/layout.ts CLUSTER_EXTRA) of the way whose data words are at `d` in `set`. */
  #extras (cx: number, set: number, d: number): number {
    return cx + (((set - this.base) / RATE_SET_WORDS) * RATE_WAYS + (d - set - RS_DATA) / RATE_DATA_WORDS) * CX_WORDS
  }

  /** Takes the lock of the set at word `set` (the control plane, to read and write a set's entries as a whole). */
  lockSet (set: number): void {
    lock(this.i32, set + RS_LOCK)
  }

  unlockSet (set: number): void {
    Atomics.store(this.i32, set + RS_LOCK, 0)
  }

  /** Entries in use (not expired) now; for tests and the runtime socket, not for hot paths. */
  live (now: number): number {
    let n = 0
    for (let s = 0; s < this.sets; s++) {
      const set = this.base + s * RATE_SET_WORDS
      for (let w = 0; w < RATE_WAYS; w++) {
        const d = set + RS_DATA + w * RATE_DATA_WORDS
        if (this.i32[set + RS_KEY_A + w] !== 0 && ((now - this.i32[d + RD_EXPIRE]!) | 0) < 0) n++
      }
    }
    return n
  }
}

/**
 * The sliding-window estimate of an entry's words (TICK, A = current, B =
 * previous) at `now`, without changing them: what window() would count before
 * adding a request. For readers outside the lock (the cluster sync).
 */
export function windowEstimate (tick: number, curr: number, prev: number, now: number, periodMs: number): number {
  let elapsed = (now - tick) | 0
  if (elapsed < 0) elapsed = 0
  if (elapsed >= 2 * periodMs) return 0
  if (elapsed >= periodMs) {
    prev = curr
    curr = 0
    elapsed -= periodMs
  }
  return curr + Math.floor((prev * (periodMs - elapsed)) / periodMs)
}

function reset (i32: Int32Array, d: number, now: number): void {
  i32[d + RD_TICK] = now
  i32[d + RD_A] = 0
  i32[d + RD_B] = 0
}

/** Set words needed for a table of `sets` sets (tests build small tables with it). */
export function rateTableWords (sets: number): number {
  return sets * RATE_SET_WORDS
}
