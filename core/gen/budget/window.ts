// One consumer's use of its windows on this node (core/gen/budget/ledger.ts
// keeps one per consumer): requests and tokens of the UTC minute and day, the
// tokens reserved by its requests in flight, the other nodes' counts and, in
// cluster mode, this node's leases and what a lease round asks for them
// (core/gen/budget/lease.ts). A cursor over a record in shared memory
// (core/shm/budget-records.ts): the ledger points it at a record whose lock
// it holds, then reads and writes the fields as plain properties.

import type { GenLimits } from '../../config/generation.js'
import { BR } from '../../shm/layout.js'

export const MINUTE_MS = 60_000
export const DAY_MS = 86_400_000

/** What a lease round asks Redis for one consumer (core/gen/budget/lease-script.ts): per limit its floor, want and use. */
export interface LeaseAsk {
  consumer: string
  minute: number
  day: number
  /** asked by a bell round (for requests waiting) */
  bell: boolean
  /** limit, floor, want, used for rpm, tpm, tpd (limit 0: no lease) */
  numbers: number[]
}

export class Usage {
  readonly #f: Float64Array
  /** f64 index of the record this cursor reads and writes (its lock held: BudgetRecords) */
  at = 0

  constructor (f64: Float64Array) {
    this.#f = f64
  }

  /** index of the current minute (ms / 60000) and day (ms / 86400000), UTC */
  get minute (): number { return this.#f[this.at + BR.minute]! }
  set minute (v: number) { this.#f[this.at + BR.minute] = v }
  get day (): number { return this.#f[this.at + BR.day]! }
  set day (v: number) { this.#f[this.at + BR.day] = v }
  get requests (): number { return this.#f[this.at + BR.requests]! }
  set requests (v: number) { this.#f[this.at + BR.requests] = v }
  get minuteTokens (): number { return this.#f[this.at + BR.minuteTokens]! }
  set minuteTokens (v: number) { this.#f[this.at + BR.minuteTokens] = v }
  get dayTokens (): number { return this.#f[this.at + BR.dayTokens]! }
  set dayTokens (v: number) { this.#f[this.at + BR.dayTokens] = v }
  get inFlight (): number { return this.#f[this.at + BR.inFlight]! }
  set inFlight (v: number) { this.#f[this.at + BR.inFlight] = v }
  /** tokens reserved by the requests in flight admitted in this minute and day */
  get reservedMinute (): number { return this.#f[this.at + BR.reservedMinute]! }
  set reservedMinute (v: number) { this.#f[this.at + BR.reservedMinute] = v }
  get reservedDay (): number { return this.#f[this.at + BR.reservedDay]! }
  set reservedDay (v: number) { this.#f[this.at + BR.reservedDay] = v }
  /** the other nodes' counts of the same windows (cluster mode; 0 otherwise) */
  get otherRequests (): number { return this.#f[this.at + BR.otherRequests]! }
  set otherRequests (v: number) { this.#f[this.at + BR.otherRequests] = v }
  get otherMinuteTokens (): number { return this.#f[this.at + BR.otherMinuteTokens]! }
  set otherMinuteTokens (v: number) { this.#f[this.at + BR.otherMinuteTokens] = v }
  get otherDayTokens (): number { return this.#f[this.at + BR.otherDayTokens]! }
  set otherDayTokens (v: number) { this.#f[this.at + BR.otherDayTokens] = v }
  /** this node's leases of the windows (cluster mode, keyed consumers): requests, minute tokens, day tokens */
  get leaseR (): number { return this.#f[this.at + BR.leaseR]! }
  set leaseR (v: number) { this.#f[this.at + BR.leaseR] = v }
  get leaseT (): number { return this.#f[this.at + BR.leaseT]! }
  set leaseT (v: number) { this.#f[this.at + BR.leaseT] = v }
  get leaseD (): number { return this.#f[this.at + BR.leaseD]! }
  set leaseD (v: number) { this.#f[this.at + BR.leaseD] = v }
  /** what this node used at the last lease round (requests, minute tokens, day tokens) */
  get syncedR (): number { return this.#f[this.at + BR.syncedR]! }
  set syncedR (v: number) { this.#f[this.at + BR.syncedR] = v }
  get syncedT (): number { return this.#f[this.at + BR.syncedT]! }
  set syncedT (v: number) { this.#f[this.at + BR.syncedT] = v }
  get syncedD (): number { return this.#f[this.at + BR.syncedD]! }
  set syncedD (v: number) { this.#f[this.at + BR.syncedD] = v }
  /** requests admitted ever, and at the last lease round: whether the consumer was active since */
  get admitted (): number { return this.#f[this.at + BR.admitted]! }
  set admitted (v: number) { this.#f[this.at + BR.admitted] = v }
  get admittedAtRound (): number { return this.#f[this.at + BR.admittedAtRound]! }
  set admittedAtRound (v: number) { this.#f[this.at + BR.admittedAtRound] = v }
  /** a request waiting for a lease round needs at least this many tokens */
  get wantTokens (): number { return this.#f[this.at + BR.wantTokens]! }
  set wantTokens (v: number) { this.#f[this.at + BR.wantTokens] = v }
  /** a request waits for a lease round */
  get want (): boolean { return this.#f[this.at + BR.want] === 1 }
  set want (v: boolean) { this.#f[this.at + BR.want] = v ? 1 : 0 }
  /** the last round granted all it asked: a request past its lease may wait for another one */
  get room (): boolean { return this.#f[this.at + BR.room] === 1 }
  set room (v: boolean) { this.#f[this.at + BR.room] = v ? 1 : 0 }
  /** a bell round granted since the last periodic round: the requests that waited for it have not used it yet */
  get fresh (): boolean { return this.#f[this.at + BR.fresh] === 1 }
  set fresh (v: boolean) { this.#f[this.at + BR.fresh] = v ? 1 : 0 }
  /** the last round asked for the use only (idle): while nothing changes, no need to ask again */
  get settled (): boolean { return this.#f[this.at + BR.settled] === 1 }
  set settled (v: boolean) { this.#f[this.at + BR.settled] = v ? 1 : 0 }

  roll (now: number): void {
    const m = Math.floor(now / MINUTE_MS)
    if (m !== this.minute) {
      this.minute = m
      this.requests = 0
      this.minuteTokens = 0
      this.reservedMinute = 0
      this.otherRequests = 0
      this.otherMinuteTokens = 0
      this.leaseR = this.leaseT = this.syncedR = this.syncedT = 0
      this.room = true
    }
    const d = Math.floor(now / DAY_MS)
    if (d !== this.day) {
      this.day = d
      this.dayTokens = 0
      this.reservedDay = 0
      this.otherDayTokens = 0
      this.leaseD = this.syncedD = 0
      this.room = true
    }
  }

  /**
   * What a lease round asks for this consumer (`id`; null: nothing to say), lowering its leases to the floors asked:
   * a lease shrinks here first and in Redis after. Each limit asks for its use plus, when a request waits (`bell`
   * rounds serve those only), a chunk (limit ÷ (4 × live nodes), for tokens at least the largest reservation
   * waiting); when the consumer was active since the last round, plus what its use grew by (at least 1, at most a
   * chunk); idle, its use only, which gives the rest back to the other nodes.
   */
  leaseAsk (id: string, limits: GenLimits, bell: boolean, nodes: number): LeaseAsk | null {
    if (bell && !this.want) return null
    const active = this.admitted !== this.admittedAtRound
    const usedT = this.minuteTokens + this.reservedMinute
    const usedD = this.dayTokens + this.reservedDay
    const idle = !this.want && !active && !this.fresh
    // idle and told already: the entry in Redis goes stale after node_ttl, when the others count its use only
    if (idle && (this.settled || (this.leaseR === 0 && this.leaseT === 0 && this.leaseD === 0)) &&
      this.syncedR === this.requests && this.syncedT === usedT && this.syncedD === usedD) return null
    const numbers: number[] = []
    const ask = (limit: number, lease: number, used: number, synced: number, need: number): number => {
      if (limit <= 0) {
        numbers.push(0, 0, 0, used)
        return 0
      }
      const chunk = Math.max(1, Math.ceil(limit / (4 * Math.max(1, nodes))), need)
      let want = used
      if (this.want) want += chunk
      else if (active) want += Math.min(chunk, Math.max(1, used - synced))
      // the requests woken by a bell round re-admit after this round may have begun: keep what it granted for them
      if (this.fresh && !bell) want = Math.max(want, lease)
      const floor = Math.min(want, lease)
      numbers.push(limit, floor, want, used)
      return floor
    }
    this.leaseR = ask(limits.rpm, this.leaseR, this.requests, this.syncedR, 1)
    this.leaseT = ask(limits.tpm, this.leaseT, usedT, this.syncedT, this.wantTokens)
    this.leaseD = ask(limits.tpd, this.leaseD, usedD, this.syncedD, this.wantTokens)
    this.want = false
    this.wantTokens = 0
    this.admittedAtRound = this.admitted
    if (!bell) this.fresh = false
    this.settled = idle
    return { consumer: id, minute: this.minute, day: this.day, bell, numbers }
  }

  /** Stores a lease round's grants and the other nodes' use (`out`: grant, others' use, for rpm, tpm, tpd) of `a`; the windows have rolled (roll()). */
  setLease (a: LeaseAsk, out: readonly number[]): void {
    const n = a.numbers
    let room = true
    if (a.minute === this.minute) {
      this.leaseR = out[0]!
      this.otherRequests = out[1]!
      this.leaseT = out[2]!
      this.otherMinuteTokens = out[3]!
      this.syncedR = n[3]!
      this.syncedT = n[7]!
      room = out[0]! >= n[2]! && out[2]! >= n[6]!
    }
    if (a.day === this.day) {
      this.leaseD = out[4]!
      this.otherDayTokens = out[5]!
      this.syncedD = n[11]!
      room &&= out[4]! >= n[10]!
    }
    this.room = room
    if (a.bell) this.fresh = true
  }
}
