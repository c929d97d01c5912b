// What each consumer has used: requests and tokens in fixed windows (the UTC
// minute for rpm and tpm, the UTC day for tpd) and requests in flight.
//
// Exact across the data plane's workers: the counts are records in shared
// memory (core/shm/budget-records.ts), and the control plane and each worker
// admit with a Ledger of their own over the same records, each decision under
// its record's lock. A worker admits the requests it relays to remote model
// servers itself (core/gen/edge/); the control plane takes the request's
// ticket over (ticket()) and charges it at the end.
//
// Fixed windows, not sliding: they are exact, cost two integers per limit, and
// give a Retry-After that is the true wait (the seconds to the window's end).
// The price: a consumer can use a minute's budget at the end of one minute and
// again at the start of the next.
//
// Tokens are known only when a request ends (prompt + completion, from its
// result). A request is admitted while its consumer's windows are under their
// budgets, counting the RESERVATIONS of the requests in flight (each the most
// tokens lb knows it may use: its max_tokens plus one per byte of its prompt),
// then charged what it used in place of its reservation. A budget is overshot by
// at most the last request admitted (it was admitted under, it may end over)
// plus what the requests in flight use beyond their reservations.
//
// Across the nodes of a cluster a key's consumer is admitted on this node's
// LEASES (lease.ts): its requests in the minute stay under its rpm lease and its
// tokens (charged + reserved) under its tpm and tpd leases; Redis grants the
// leases out of what the other nodes hold, so they never sum past the limits.
// Past a lease the request waits for a lease round (Budget.admit). With Redis
// down (or no cluster) the limits apply to this node's counts plus the other
// nodes' at the last round, as before the leases.

import type { GenLimits } from '../../config/generation.js'
import { ERRORS, formatError } from '../../errors.js'
import type { ApiError } from '../dispatch/request.js'
import { BudgetRecords } from '../../shm/budget-records.js'
import { BUDGET_SETS_ON, BUDGET_WAYS } from '../../shm/layout.js'
import { hasLimits } from './conf.js'
import { DAY_MS, type LeaseAsk, MINUTE_MS, Usage } from './window.js'

export type { LeaseAsk } from './window.js'

/** Why a request was refused (the `reason` label of lb_gen_consumer_rejections_total). */
export const REJECT_REASONS = ['unauthorized', 'model', 'rpm', 'tpm', 'tpd', 'in_flight', 'table_full'] as const
export type RejectReason = typeof REJECT_REASONS[number]

/** A consumer's counts in its current windows (tokens: charged plus reserved by its requests in flight). */
export interface WindowCounts {
  /** the UTC minute (ms / 60000) and day (ms / 86400000) they are of */
  minute: number
  day: number
  requests: number
  minuteTokens: number
  dayTokens: number
}

/** An admitted request: give it back once, charging what it used, or refunded when it never ran. */
export interface Ticket {
  /** the UTC minute and day it was admitted in (its reservation's windows: ticket()) */
  readonly minute: number
  readonly day: number
  end (tokens: number): void
  /** The request never started (no server could take it): it leaves no trace in the requests per minute. */
  refund (): void
}

/**
 * `held`: refused on this node's lease while the cluster had room (the other nodes hold it); `wait`: a lease
 * round may grant some (Budget.admit waits for it).
 */
export interface Refusal extends ApiError { reason: RejectReason, held: boolean, wait: boolean }

const secondsTo = (end: number, now: number): number => Math.max(1, Math.ceil((end - now) / 1000))

/** #open's answers other than a record: a consumer without a key or limits (nothing counted), or no record for it. */
const UNCOUNTED = -2
const NO_RECORD = -1

/** What a consumer without a key and without limits is given: nothing of it is counted. */
const FREE: Ticket = { minute: 0, day: 0, end: () => {}, refund: () => {} }

const limitText = (reason: RejectReason, l: GenLimits): string =>
  reason === 'in_flight'
    ? `max_in_flight = ${l.maxInFlight} requests at once`
    : reason === 'rpm' ? `rpm = ${l.rpm} requests per minute` : reason === 'tpm' ? `tpm = ${l.tpm} tokens per minute` : `tpd = ${l.tpd} tokens per UTC day`

export class Ledger {
  readonly #records: BudgetRecords
  /** a keyed consumer's id -> its position in [[generation.keys]] (its record) */
  readonly #keyed = new Map<string, number>()
  /** the cursor over the record whose lock this thread holds */
  readonly #u: Usage
  /** ms since the epoch (a parameter so that a test can move time) */
  readonly #clock: () => number
  /** the clock when #open took the record now open */
  #now = 0
  // a refusal as decided under the lock, built once it is released (a critical section allocates nothing)
  #reason: RejectReason = 'rpm'
  #used = 0
  #seconds = 0
  #held = false
  #wait = false

  /** `keyed`: the keyed consumers' ids in [[generation.keys]] order, as every thread sharing `records` has them. */
  constructor (keyed: readonly string[], clock: () => number = Date.now, records = BudgetRecords.private(keyed.length, BUDGET_SETS_ON)) {
    keyed.forEach((id, i) => this.#keyed.set(id, i))
    this.#records = records
    this.#u = new Usage(records.f64)
    this.#clock = clock
  }

  /**
   * Admits a request of consumer `id` under `limits` reserving `reserve` tokens (its most, as far as lb knows before
   * it runs), or says why not. `leased`: the consumer is held to this node's leases (cluster mode, Redis up).
   */
  admit (id: string, limits: GenLimits, reserve = 0, leased = false): Ticket | Refusal {
    const rec = this.#open(id, limits, true)
    if (rec === UNCOUNTED) return FREE
    if (rec === NO_RECORD) return full(id)
    const u = this.#u
    const ok = this.#check(u, limits, reserve, leased)
    if (ok) {
      u.requests++
      u.admitted++
      u.inFlight++
      u.reservedMinute += reserve
      u.reservedDay += reserve
    }
    const minute = u.minute
    const day = u.day
    this.#records.close(rec)
    if (ok) return this.#ticket(rec, reserve, minute, day)
    const r = refusal(id, this.#reason, limitText(this.#reason, limits), this.#used, this.#seconds, this.#held)
    r.wait = this.#wait
    return r
  }

  /**
   * The ticket of a request that another thread sharing the records admitted for `id` (its Ticket's minute and
   * day, `reserve` as admitted): ending it here gives back what that admission took.
   */
  ticket (id: string, limits: GenLimits, reserve: number, minute: number, day: number): Ticket {
    // the record is there: a way with a request in flight is never given to another consumer
    const rec = this.#open(id, limits, false)
    if (rec < 0) return FREE
    this.#records.close(rec)
    return this.#ticket(rec, reserve, minute, day)
  }

  /** What a lease round asks for keyed consumer `id` (null: nothing to say): Usage.leaseAsk. */
  leaseAsk (id: string, limits: GenLimits, bell: boolean, nodes: number): LeaseAsk | null {
    const rec = this.#open(id, limits, false)
    if (rec < 0) return null
    const a = this.#u.leaseAsk(id, limits, bell, nodes)
    this.#records.close(rec)
    return a
  }

  /** Stores a lease round's grants and the other nodes' use (`out`: grant, others' use, for rpm, tpm, tpd) of `a`. */
  setLease (a: LeaseAsk, limits: GenLimits, out: readonly number[]): void {
    const rec = this.#open(a.consumer, limits, false)
    if (rec < 0) return
    this.#u.setLease(a, out)
    this.#records.close(rec)
  }

  /** Whether admissions go by the cluster's leases (BudgetLease started, Redis up), as every thread sees it. */
  get leased (): boolean { return this.#records.leased() }
  /** BudgetLease started (true) or stopped. */
  setLeasing (on: boolean): void { this.#records.leasing = on }

  /** Consumer `id`'s use of its current windows, the other nodes' included (what admit() compares with the limits). */
  used (id: string, limits: GenLimits): WindowCounts & { inFlight: number } {
    const rec = this.#open(id, limits, false)
    if (rec < 0) return { minute: 0, day: 0, requests: 0, minuteTokens: 0, dayTokens: 0, inFlight: 0 }
    const u = this.#u
    const counts = {
      minute: u.minute,
      day: u.day,
      requests: u.requests + u.otherRequests,
      minuteTokens: u.minuteTokens + u.reservedMinute + u.otherMinuteTokens,
      dayTokens: u.dayTokens + u.reservedDay + u.otherDayTokens,
      inFlight: u.inFlight,
    }
    this.#records.close(rec)
    return counts
  }

  /**
   * Consumer `id`'s record, its lock taken and the cursor on it with its windows rolled to now (close() it);
   * UNCOUNTED: a consumer without a key or limits, nothing kept; NO_RECORD: not `create`d, or none free
   * (BudgetRecords.openAnon).
   */
  #open (id: string, limits: GenLimits, create: boolean): number {
    const k = this.#keyed.get(id)
    if (k === undefined && !hasLimits(limits)) return UNCOUNTED
    const now = this.#now = this.#clock()
    const rec = k !== undefined ? this.#records.openKeyed(k) : this.#records.openAnon(id, now, create)
    if (rec >= 0) {
      this.#u.at = rec
      this.#u.roll(now)
    }
    return rec
  }

  /** Whether the request may run; if not, why (#reason...). The record's lock is held. */
  #check (u: Usage, limits: GenLimits, reserve: number, leased: boolean): boolean {
    const now = this.#now
    const nextMinute = (u.minute + 1) * MINUTE_MS
    this.#held = false
    this.#wait = false
    if (limits.maxInFlight > 0 && u.inFlight >= limits.maxInFlight) return this.#over('in_flight', u.inFlight, 1)
    // the cluster's counts (this node's alone without one): over these the consumer is over its budget
    const requests = u.requests + u.otherRequests
    if (limits.rpm > 0 && requests >= limits.rpm) return this.#over('rpm', requests, secondsTo(nextMinute, now))
    // full only with this node's reservations: the room may come back when its requests end (Retry-After 1)
    const minuteTokens = u.minuteTokens + u.reservedMinute + u.otherMinuteTokens
    if (limits.tpm > 0 && minuteTokens >= limits.tpm) {
      return this.#over('tpm', minuteTokens, minuteTokens - u.reservedMinute < limits.tpm ? 1 : secondsTo(nextMinute, now))
    }
    const dayTokens = u.dayTokens + u.reservedDay + u.otherDayTokens
    if (limits.tpd > 0 && dayTokens >= limits.tpd) {
      return this.#over('tpd', dayTokens, dayTokens - u.reservedDay < limits.tpd ? 1 : secondsTo((u.day + 1) * DAY_MS, now))
    }
    if (!leased) return true
    // under the cluster's limits but past this node's lease: the other nodes hold the rest, maybe unused
    if (limits.rpm > 0 && u.requests >= u.leaseR) this.#over('rpm', requests, 1)
    else if (limits.tpm > 0 && u.minuteTokens + u.reservedMinute >= u.leaseT) this.#over('tpm', minuteTokens, 1)
    else if (limits.tpd > 0 && u.dayTokens + u.reservedDay >= u.leaseD) this.#over('tpd', dayTokens, 1)
    else return true
    this.#held = true
    this.#wait = u.room
    if (u.room) {
      u.want = true
      u.wantTokens = Math.max(u.wantTokens, reserve)
    }
    return false
  }

  #over (reason: RejectReason, used: number, seconds: number): false {
    this.#reason = reason
    this.#used = used
    this.#seconds = seconds
    return false
  }

  /** The ticket of a request admitted on record `rec` in `minute` and `day`, reserving `reserve` there. */
  #ticket (rec: number, reserve: number, minute: number, day: number): Ticket {
    let ended = false
    const release = (tokens: number, refund: boolean): void => {
      if (ended) return
      ended = true
      const now = this.#clock()
      this.#records.reopen(rec)
      const u = this.#u
      u.at = rec
      u.inFlight--
      // charged to the windows the request ends in; its reservation was of the windows it began in
      u.roll(now)
      if (u.minute === minute) u.reservedMinute -= reserve
      if (u.day === day) u.reservedDay -= reserve
      if (!refund) {
        u.minuteTokens += tokens
        u.dayTokens += tokens
      } else if (u.minute === minute) u.requests--
      this.#records.close(rec)
    }
    return { minute, day, end: (tokens) => release(tokens, false), refund: () => release(0, true) }
  }
}

function refusal (consumer: string, reason: RejectReason, limit: string, used: number, seconds: number, held = false): Refusal {
  const message = held
    ? formatError('LB_ERR_GEN_BUDGET_HELD', { consumer, limit, used, seconds })
    : formatError('LB_ERR_GEN_OVER_BUDGET', { consumer, limit, used, seconds })
  return { status: ERRORS.LB_ERR_GEN_OVER_BUDGET.status, message, code: 'rate_limit_exceeded', retryAfter: seconds, reason, held, wait: false }
}

/** A consumer without a key whose place in the budget table is taken by consumers with requests in flight: 503, as it is over nothing. */
function full (consumer: string): Refusal {
  const message = formatError('LB_ERR_GEN_BUDGET_FULL', { consumer, ways: BUDGET_WAYS, seconds: 1 })
  return { status: ERRORS.LB_ERR_GEN_BUDGET_FULL.status, message, code: 'budget_table_full', retryAfter: 1, reason: 'table_full', held: false, wait: false }
}
