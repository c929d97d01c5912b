// Revoked sessions, shared by every worker of a node (core/shm/layout.ts,
// "Session revocations"): a logout on one worker is refused on every other at
// its next request, with no message between threads. The control plane writes
// here too, what other nodes revoked (core/cluster/revocations.ts) and what
// this node revoked before a restart (core/control/revocation-file.ts).
//
// An entry refuses the sessions of one key (a digest of lb's session id, of
// the provider's session id, or of a subject) born at or before its AT, until
// its EXP, the end of the longest session it can refuse. The table is
// two-choice set-associative: a key may live in either of two sets, an add
// goes to the emptier, so sets fill evenly and the table takes about 90% of
// its entries before one add finds both sets full (an entry of a full set
// moves to its other set to make room: one cuckoo step).
//
// Full: an entry is never dropped while it is live. When both sets of a new
// key are full of live entries, the table moves its epoch to now: every
// session born until now is refused (every user logs in again) and every
// entry, now redundant, is freed. Forgetting a revocation would let a logged
// out session back in; this costs logins instead, and is counted and logged.
//
// Readers take no lock. GEN is a sequence lock: a writer (under the lock word)
// makes it odd before it changes entries and even (and new) after; a look that
// saw the same even GEN before and after saw no change half done (check()). A
// session looked up at the current GEN needs no new look: one Atomics.load per
// request. Times are unix seconds as uint32.
import { createHash } from 'node:crypto'
import {
  REVOKE_BASE, REVOKE_HEADER_WORDS, REVOKE_SETS, REVOKE_SET_WORDS, REVOKE_WAYS, RVH_EPOCH, RVH_GEN, RVH_LOCK, RVH_RESETS,
  RV_AT, RV_EXP, RV_KEY_A, RV_KEY_B,
} from './layout.js'
import { lock } from './shm-lock.js'

/** a GEN odd for longer than this belongs to a writer that died inside its change (a terminated worker), ms */
const STALE_WRITE_MS = 250

/** add(): a new entry; an entry of the key was there and now holds the later times; nothing to do (over, under the epoch, or there already); the table was full. */
export const ADDED = 0
export const KEPT = 1
export const REDUNDANT = 2
export const RESET = 3

/** One entry as it crosses threads, files and Redis. */
export interface Revocation {
  readonly ka: number
  readonly kb: number
  /** unix s: the entry is over after this */
  readonly exp: number
  /** unix s: sessions of the key born at or before this are refused */
  readonly at: number
}

/**
 * The table key of a subject (e.g. "lb-session\0<id>"): the first 64 bits of its SHA-256, so a provider's
 * user cannot choose a subject that collides with another's. KEY_A is never 0. Once per session or
 * revocation, never per request.
 */
export function revocationKey (subject: string): [number, number] {
  const d = createHash('sha256').update(subject).digest()
  return [d.readInt32LE(0) | 1, d.readInt32LE(4)]
}

/** A key as 16 hex digits (Redis members, the revocation file). */
export function keyHex (ka: number, kb: number): string {
  return (ka >>> 0).toString(16).padStart(8, '0') + (kb >>> 0).toString(16).padStart(8, '0')
}

/** The key of 16 hex digits, or null. */
export function parseKeyHex (hex: string): [number, number] | null {
  if (!/^[0-9a-f]{16}$/.test(hex)) return null
  const ka = Number.parseInt(hex.slice(0, 8), 16) | 0
  return (ka & 1) === 0 ? null : [ka, Number.parseInt(hex.slice(8), 16) | 0]
}

/** unix s now */
export function unixNow (): number {
  return Math.floor(Date.now() / 1000)
}

export class Revocations {
  readonly i32: Int32Array
  readonly base: number
  readonly sets: number
  readonly #table: number
  /** the GEN of the last check() (NaN: none to trust) */
  seen = NaN

  /** The table of `i32` (default: the region of core/shm/layout.ts); tests may pass a small one. */
  constructor (i32: Int32Array, base = REVOKE_BASE, sets = REVOKE_SETS) {
    this.i32 = i32
    this.base = base
    this.sets = sets
    this.#table = base + REVOKE_HEADER_WORDS
  }

  /** Changes with every add and epoch move (odd while one is half done): a session checked at the same value is as it was. */
  gen (): number {
    return Atomics.load(this.i32, this.base + RVH_GEN)
  }

  /** unix s: every session born at or before it is refused (0 = none) */
  epoch (): number {
    return this.i32[this.base + RVH_EPOCH]! >>> 0
  }

  /** times the table was full and the epoch moved */
  resets (): number {
    return Atomics.load(this.i32, this.base + RVH_RESETS)
  }

  /** Whether a session of key (ka, kb) born at `bornS` is refused at `nowS`, as the table is (a writer may be at work: see check). No lock, no allocation. */
  revoked (ka: number, kb: number, bornS: number, nowS: number): boolean {
    if (bornS <= (this.i32[this.base + RVH_EPOCH]! >>> 0)) return true
    return this.#match(this.#first(kb), ka, kb, bornS, nowS) || this.#match(this.#second(ka, kb), ka, kb, bornS, nowS)
  }

  /**
   * Whether a session of (ka, kb) born at `bornS` is refused at `nowS`, from a look no writer was in the
   * middle of: GEN even and the same before and after (a writer makes it odd while it changes entries), so
   * an entry moving between its sets is never missed and a half-written one never matches. `seen` is then
   * that GEN. A GEN odd for longer than STALE_WRITE_MS belongs to a writer that died inside its change:
   * the table is taken as it is and `seen` is NaN (look again next time).
   */
  check (ka: number, kb: number, bornS: number, nowS: number): boolean {
    const i32 = this.i32
    const at = this.base + RVH_GEN
    let since = 0
    for (let spins = 1; ; spins++) {
      const before = Atomics.load(i32, at)
      if ((before & 1) === 0) {
        const revoked = this.revoked(ka, kb, bornS, nowS)
        if (Atomics.load(i32, at) === before) {
          this.seen = before
          return revoked
        }
      }
      if (spins % 1024 === 0) {
        const t = Date.now()
        if (since === 0) since = t
        else if (t - since > STALE_WRITE_MS) {
          this.seen = NaN
          return this.revoked(ka, kb, bornS, nowS)
        }
      }
    }
  }

  /**
   * Revokes the sessions of (ka, kb) born at or before `at` until `exp` (unix s). Returns ADDED, KEPT,
   * REDUNDANT, or RESET when both sets of the key were full of live entries (the epoch moved to now).
   */
  add (r: Revocation, nowS: number): number {
    if (r.exp <= nowS) return REDUNDANT
    const i32 = this.i32
    lock(i32, this.base + RVH_LOCK)
    let writing = false
    try {
      if (r.at <= this.epoch()) return REDUNDANT
      const a = this.#first(r.kb)
      const b = this.#second(r.ka, r.kb)
      const found = this.#find(a, r.ka, r.kb) ?? this.#find(b, r.ka, r.kb)
      if (found !== null) {
        // the same entry again (a node reading the cluster's) changes nothing
        if (r.exp <= (i32[found + RV_EXP]! >>> 0) && r.at <= (i32[found + RV_AT]! >>> 0)) return REDUNDANT
        writing = this.#begin()
        if (r.exp > (i32[found + RV_EXP]! >>> 0)) i32[found + RV_EXP] = r.exp | 0
        if (r.at > (i32[found + RV_AT]! >>> 0)) i32[found + RV_AT] = r.at | 0
        return KEPT
      }
      writing = this.#begin()
      const fa = this.#free(a, nowS)
      const fb = this.#free(b, nowS)
      let set = fa >= fb ? a : b
      let way = this.#freeWay(set, nowS)
      if (way < 0) {
        // both full: an entry of either that has room in its other set moves there (one cuckoo step)
        way = this.#makeRoom(a, nowS)
        set = a
        if (way < 0) {
          way = this.#makeRoom(b, nowS)
          set = b
        }
      }
      if (way < 0) {
        this.#moveEpoch(Math.max(nowS, r.at))
        Atomics.add(i32, this.base + RVH_RESETS, 1)
        return RESET
      }
      i32[set + RV_KEY_A + way] = 0
      i32[set + RV_EXP + way] = r.exp | 0
      i32[set + RV_AT + way] = r.at | 0
      i32[set + RV_KEY_B + way] = r.kb
      i32[set + RV_KEY_A + way] = r.ka
      return ADDED
    } finally {
      if (writing) this.#end()
      Atomics.store(i32, this.base + RVH_LOCK, 0)
    }
  }

  /** Moves the epoch to `s` (another node's, a file's) when later; true when it moved. */
  setEpoch (s: number): boolean {
    const i32 = this.i32
    lock(i32, this.base + RVH_LOCK)
    try {
      if (s <= this.epoch()) return false
      this.#begin()
      this.#moveEpoch(s)
      this.#end()
      return true
    } finally {
      Atomics.store(i32, this.base + RVH_LOCK, 0)
    }
  }

  /** Under the lock, before changing entries: GEN odd (readers look again). Also mends a GEN left odd by a writer that died. */
  #begin (): true {
    const at = this.base + RVH_GEN
    Atomics.store(this.i32, at, Atomics.load(this.i32, at) | 1)
    return true
  }

  /** Under the lock, after: GEN even, and not what it was before (readers that looked before look again). */
  #end (): void {
    Atomics.add(this.i32, this.base + RVH_GEN, 1)
  }

  /** Live entries now (metrics, tests). */
  live (nowS: number): number {
    let n = 0
    this.#each(nowS, () => { n++ })
    return n
  }

  /** Every live entry (the control plane: the revocation file, seeding an empty Redis). */
  entries (nowS: number): Revocation[] {
    const out: Revocation[] = []
    this.#each(nowS, (ka, kb, exp, at) => { out.push({ ka, kb, exp, at }) })
    return out
  }

  #each (nowS: number, f: (ka: number, kb: number, exp: number, at: number) => void): void {
    const i32 = this.i32
    const epoch = this.epoch()
    for (let s = 0; s < this.sets; s++) {
      const set = this.#table + s * REVOKE_SET_WORDS
      for (let w = 0; w < REVOKE_WAYS; w++) {
        const ka = i32[set + RV_KEY_A + w]!
        const exp = i32[set + RV_EXP + w]! >>> 0
        const at = i32[set + RV_AT + w]! >>> 0
        if (ka !== 0 && exp > nowS && at > epoch) f(ka, i32[set + RV_KEY_B + w]!, exp, at)
      }
    }
  }

  /** Under the lock: the epoch moves to `s`, then every entry it covers (all of them when s is now) is freed. */
  #moveEpoch (s: number): void {
    const i32 = this.i32
    Atomics.store(i32, this.base + RVH_EPOCH, s | 0)
    for (let set = this.#table, end = this.#table + this.sets * REVOKE_SET_WORDS; set < end; set += REVOKE_SET_WORDS) {
      for (let w = 0; w < REVOKE_WAYS; w++) if ((i32[set + RV_AT + w]! >>> 0) <= s) i32[set + RV_KEY_A + w] = 0
    }
  }

  /**
   * Moves an entry of the full `set` to its other set when that one has a free way; returns the way
   * freed in `set`, or -1. The entry is written in its new place before its old one is freed, so a
   * reader finds it in one or the other throughout (and GEN, odd meanwhile, sends it to look again).
   */
  #makeRoom (set: number, nowS: number): number {
    const i32 = this.i32
    for (let w = 0; w < REVOKE_WAYS; w++) {
      const ka = i32[set + RV_KEY_A + w]!
      const kb = i32[set + RV_KEY_B + w]!
      const first = this.#first(kb)
      const other = first === set ? this.#second(ka, kb) : first
      const to = this.#freeWay(other, nowS)
      if (to < 0) continue
      i32[other + RV_KEY_A + to] = 0
      i32[other + RV_EXP + to] = i32[set + RV_EXP + w]!
      i32[other + RV_AT + to] = i32[set + RV_AT + w]!
      i32[other + RV_KEY_B + to] = kb
      i32[other + RV_KEY_A + to] = ka
      i32[set + RV_KEY_A + w] = 0
      return w
    }
    return -1
  }

  #first (kb: number): number {
    return this.#table + ((kb >>> 0) % this.sets) * REVOKE_SET_WORDS
  }

  /** the second choice: from the other half of the key, never the first set */
  #second (ka: number, kb: number): number {
    const a = (kb >>> 0) % this.sets
    let b = (ka >>> 1) % this.sets
    if (b === a) b = (a + 1) % this.sets
    return this.#table + b * REVOKE_SET_WORDS
  }

  #match (set: number, ka: number, kb: number, bornS: number, nowS: number): boolean {
    const i32 = this.i32
    for (let w = 0; w < REVOKE_WAYS; w++) {
      if (i32[set + RV_KEY_A + w] === ka && i32[set + RV_KEY_B + w] === kb &&
        (i32[set + RV_EXP + w]! >>> 0) > nowS && bornS <= (i32[set + RV_AT + w]! >>> 0)) return true
    }
    return false
  }

  /** word offset of the way of (ka, kb) in `set` (its KEY_A word's way base: set + way), or null */
  #find (set: number, ka: number, kb: number): number | null {
    for (let w = 0; w < REVOKE_WAYS; w++) if (this.i32[set + RV_KEY_A + w] === ka && this.i32[set + RV_KEY_B + w] === kb) return set + w
    return null
  }

  #free (set: number, nowS: number): number {
    let n = 0
    for (let w = 0; w < REVOKE_WAYS; w++) if (this.#isFree(set, w, nowS)) n++
    return n
  }

  #freeWay (set: number, nowS: number): number {
    for (let w = 0; w < REVOKE_WAYS; w++) if (this.#isFree(set, w, nowS)) return w
    return -1
  }

  #isFree (set: number, w: number, nowS: number): boolean {
    return this.i32[set + RV_KEY_A + w] === 0 || (this.i32[set + RV_EXP + w]! >>> 0) <= nowS || (this.i32[set + RV_AT + w]! >>> 0) <= this.epoch()
  }
}

/** Words of a table of `sets` sets with its header (tests build small tables with it). */
export function revocationWords (sets: number): number {
  return REVOKE_HEADER_WORDS + sets * REVOKE_SET_WORDS
}
