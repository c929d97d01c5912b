// Where each generation consumer's budget record lives in shared memory
// (layout.ts, "Generation budgets"), and the lock that guards it, so that the
// control plane and every data-plane worker admit requests on the same counts
// (core/gen/budget/ledger.ts reads and writes the fields).
//
// A consumer with a key has its own record and lock word, for the life of the
// process ([generation] is static). Consumers without a key (users, source
// addresses) are unbounded in number: they live in a set-associative table as
// the rate limits' sources do (core/shm/rate-table.ts), keyed by two hashes of
// their id, one lock per set guarding its ways' records. A full set gives its
// least recently used idle way to a newcomer, who starts with fresh windows; a
// way with a request in flight is never given away, so an admitted request's
// record stays its consumer's until it ends. Past BUDGET_WAYS consumers in
// flight in one set a newcomer gets no record (openAnon() = -1).
// A request in flight is given back by its ticket's end, in whichever thread
// holds it; a worker that dies in the same turn of its loop in which it
// admitted a request, before telling the control plane (EdgeAdmitted), leaves
// that one in flight, as core/shm/model-inflight.ts says of its counts.

import {
  BH_LEASING, BR, BR_WORDS, BS_KEY_A, BS_KEY_B, BS_LOCK, BS_SEEN, BUDGET_BASE, BUDGET_HEADER_WORDS,
  BUDGET_KEYED, BUDGET_LOCKS, BUDGET_RECORDS, BUDGET_SET_WORDS, BUDGET_SETS, BUDGET_TABLE, BUDGET_WAYS, CLH_UP,
  CLUSTER_BASE, CLUSTER_SETS, type Shm,
} from './layout.js'
import { KeyHasher } from './rate-keys.js'
import { lock } from './shm-lock.js'

export class BudgetRecords {
  readonly i32: Int32Array
  readonly f64: Float64Array
  /** records of consumers with a key, and sets of the others */
  readonly keyed: number
  readonly sets: number
  /** i32 index of the header, the keyed lock words and the table; f64 index of record 0 */
  readonly #header: number
  readonly #locks: number
  readonly #table: number
  readonly #records: number
  /** i32 index of the cluster's Redis health (CLH_UP), -1 without [cluster] */
  readonly #clusterUp: number
  readonly #h = new KeyHasher()

  constructor (i32: Int32Array, f64: Float64Array, keyed: number, sets: number, header: number, locks: number, table: number, records: number, clusterUp = -1) {
    this.i32 = i32
    this.f64 = f64
    this.keyed = keyed
    this.sets = sets
    this.#header = header
    this.#locks = locks
    this.#table = table
    this.#records = records
    this.#clusterUp = clusterUp
  }

  /** The shared memory's records (its layout as this thread attached it). */
  static of (shm: Shm): BudgetRecords {
    return new BudgetRecords(shm.i32, shm.f64, BUDGET_KEYED, BUDGET_SETS, BUDGET_BASE, BUDGET_LOCKS, BUDGET_TABLE, BUDGET_RECORDS,
      CLUSTER_SETS > 0 ? CLUSTER_BASE + CLH_UP : -1)
  }

  /** Records of this thread alone, same layout (a generation service run without the data plane: tests, tools). */
  static private (keyed: number, sets: number): BudgetRecords {
    const locks = BUDGET_HEADER_WORDS
    const table = locks + keyed
    const i32 = new Int32Array(new SharedArrayBuffer((table + sets * BUDGET_SET_WORDS) * 4))
    const f64 = new Float64Array((keyed + sets * BUDGET_WAYS) * BR_WORDS)
    return new BudgetRecords(i32, f64, keyed, sets, 0, locks, table, 0)
  }

  /** Whether the keys' budgets are leased from the cluster now (lease.ts, while started). */
  get leasing (): boolean { return Atomics.load(this.i32, this.#header + BH_LEASING) === 1 }
  set leasing (on: boolean) { Atomics.store(this.i32, this.#header + BH_LEASING, on ? 1 : 0) }

  /** Whether a request is admitted on this node's leases: they are leased and the cluster's Redis is judged up. */
  leased (): boolean {
    return this.leasing && this.#clusterUp >= 0 && Atomics.load(this.i32, this.#clusterUp) === 1
  }

  /** The record of keyed consumer `i` (its position in [[generation.keys]]), its lock taken: close() it. */
  openKeyed (i: number): number {
    lock(this.i32, this.#locks + i)
    return this.#records + i * BR_WORDS
  }

  /**
   * The record of consumer `id` without a key, its lock taken (close() it); -1 when it has none: not `create`d,
   * or its set's every way has requests in flight. `now`: ms, the way's last use.
   */
  openAnon (id: string, now: number, create: boolean): number {
    if (this.sets === 0) return -1
    const h = this.#h
    h.hash(id)
    const ka = h.a | 1
    const kb = h.b
    const setIndex = (kb >>> 0) % this.sets
    const set = this.#table + setIndex * BUDGET_SET_WORDS
    const i32 = this.i32
    lock(i32, set + BS_LOCK)
    let way = -1
    for (let w = 0; w < BUDGET_WAYS; w++) {
      if (i32[set + BS_KEY_A + w] === ka && i32[set + BS_KEY_B + w] === kb) { way = w; break }
    }
    if (way < 0 && create) way = this.#claim(set, setIndex, ka, kb, now)
    if (way < 0) {
      Atomics.store(i32, set + BS_LOCK, 0)
      return -1
    }
    i32[set + BS_SEEN + way] = now | 0
    return this.#recordOf(setIndex, way)
  }

  /** Takes record `rec`'s lock again (an admitted request ending: its record is still its consumer's). */
  reopen (rec: number): void {
    lock(this.i32, this.#lockOf(rec))
  }

  close (rec: number): void {
    Atomics.store(this.i32, this.#lockOf(rec), 0)
  }

  /** A free way, else the least recently used one without requests in flight, its record cleared; -1: none. */
  #claim (set: number, setIndex: number, ka: number, kb: number, now: number): number {
    const i32 = this.i32
    let way = -1
    let oldest = 0
    for (let w = 0; w < BUDGET_WAYS; w++) {
      if (i32[set + BS_KEY_A + w] === 0) { way = w; break }
      if (this.f64[this.#recordOf(setIndex, w) + BR.inFlight]! > 0) continue
      const age = ((now | 0) - i32[set + BS_SEEN + w]!) | 0
      if (way < 0 || age > oldest) { way = w; oldest = age }
    }
    if (way < 0) return -1
    i32[set + BS_KEY_A + way] = ka
    i32[set + BS_KEY_B + way] = kb
    const rec = this.#recordOf(setIndex, way)
    this.f64.fill(0, rec, rec + BR_WORDS)
    return way
  }

  #recordOf (setIndex: number, way: number): number {
    return this.#records + (this.keyed + setIndex * BUDGET_WAYS + way) * BR_WORDS
  }

  #lockOf (rec: number): number {
    const r = (rec - this.#records) / BR_WORDS
    return r < this.keyed ? this.#locks + r : this.#table + ((r - this.keyed) / BUDGET_WAYS | 0) * BUDGET_SET_WORDS + BS_LOCK
  }
}
