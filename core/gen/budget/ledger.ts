// What each consumer has used: requests and tokens in fixed windows (the UTC
// minute for rpm and tpm, the UTC day for tpd) and requests in flight.
//
// Exact across the data plane's workers: every worker forwards generation
// requests to this one service in the control plane, so these in-process
// counters see every request of the node; no shared memory is needed.
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
import { DAY_MS, type LeaseAsk, MINUTE_MS, Usage } from './window.js'

export type { LeaseAsk } from './window.js'

/** Consumers without a key (users, addresses) remembered at most; past it, idle ones are forgotten, oldest first. */
export const MAX_ANON = 100_000

/** Why a request was refused (the `reason` label of lb_gen_consumer_rejections_total). */
export const REJECT_REASONS = ['unauthorized', 'model', 'rpm', 'tpm', 'tpd', 'in_flight'] as const
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

export class Ledger {
  /** Map order is insertion order: the oldest consumers come first when the anonymous ones must be trimmed. */
  readonly #usage = new Map<string, Usage>()
  #anon = 0
  readonly #keyed: ReadonlySet<string>
  /** ms since the epoch (a parameter so that a test can move time) */
  readonly #clock: () => number

  constructor (keyed: Iterable<string>, clock: () => number = Date.now) {
    this.#keyed = new Set(keyed)
    this.#clock = clock
  }

  /**
   * Admits a request of consumer `id` under `limits` reserving `reserve` tokens (its most, as far as lb knows before
   * it runs), or says why not. `leased`: the consumer is held to this node's leases (cluster mode, Redis up).
   */
  admit (id: string, limits: GenLimits, reserve = 0, leased = false): Ticket | Refusal {
    const now = this.#clock()
    const u = this.#get(id)
    u.roll(now)
    const nextMinute = (u.minute + 1) * MINUTE_MS
    if (limits.maxInFlight > 0 && u.inFlight >= limits.maxInFlight) {
      return refusal(id, 'in_flight', `max_in_flight = ${limits.maxInFlight} requests at once`, u.inFlight, 1)
    }
    // the cluster's counts (this node's alone without one): over these the consumer is over its budget
    const requests = u.requests + u.otherRequests
    if (limits.rpm > 0 && requests >= limits.rpm) {
      return refusal(id, 'rpm', `rpm = ${limits.rpm} requests per minute`, requests, secondsTo(nextMinute, now))
    }
    // full only with this node's reservations: the room may come back when its requests end (Retry-After 1)
    const minuteTokens = u.minuteTokens + u.reservedMinute + u.otherMinuteTokens
    if (limits.tpm > 0 && minuteTokens >= limits.tpm) {
      const s = minuteTokens - u.reservedMinute < limits.tpm ? 1 : secondsTo(nextMinute, now)
      return refusal(id, 'tpm', `tpm = ${limits.tpm} tokens per minute`, minuteTokens, s)
    }
    const dayTokens = u.dayTokens + u.reservedDay + u.otherDayTokens
    if (limits.tpd > 0 && dayTokens >= limits.tpd) {
      const s = dayTokens - u.reservedDay < limits.tpd ? 1 : secondsTo((u.day + 1) * DAY_MS, now)
      return refusal(id, 'tpd', `tpd = ${limits.tpd} tokens per UTC day`, dayTokens, s)
    }
    if (leased) {
      // under the cluster's limits but past this node's lease: the other nodes hold the rest, maybe unused
      const over = limits.rpm > 0 && u.requests >= u.leaseR
        ? refusal(id, 'rpm', `rpm = ${limits.rpm} requests per minute`, requests, 1, true)
        : limits.tpm > 0 && u.minuteTokens + u.reservedMinute >= u.leaseT
          ? refusal(id, 'tpm', `tpm = ${limits.tpm} tokens per minute`, minuteTokens, 1, true)
          : limits.tpd > 0 && u.dayTokens + u.reservedDay >= u.leaseD
            ? refusal(id, 'tpd', `tpd = ${limits.tpd} tokens per UTC day`, dayTokens, 1, true)
            : null
      if (over !== null) {
        over.wait = u.room
        if (u.room) {
          u.want = true
          u.wantTokens = Math.max(u.wantTokens, reserve)
        }
        return over
      }
    }
    u.requests++
    u.admitted++
    u.inFlight++
    u.reservedMinute += reserve
    u.reservedDay += reserve
    const minute = u.minute
    const day = u.day
    let ended = false
    const release = (): void => {
      ended = true
      u.inFlight--
      // charged to the windows the request ends in; its reservation was of the windows it began in
      u.roll(this.#clock())
      if (u.minute === minute) u.reservedMinute -= reserve
      if (u.day === day) u.reservedDay -= reserve
    }
    return {
      end: (tokens) => {
        if (ended) return
        release()
        u.minuteTokens += tokens
        u.dayTokens += tokens
      },
      refund: () => {
        if (ended) return
        release()
        if (u.minute === minute) u.requests--
      },
    }
  }

  /** What a lease round asks for consumer `id` (null: nothing to say): Usage.leaseAsk. */
  leaseAsk (id: string, limits: GenLimits, bell: boolean, nodes: number): LeaseAsk | null {
    const u = this.#get(id)
    u.roll(this.#clock())
    return u.leaseAsk(id, limits, bell, nodes)
  }

  /** Stores a lease round's grants and the other nodes' use (`out`: grant, others' use, for rpm, tpm, tpd) of `a`. */
  setLease (a: LeaseAsk, out: readonly number[]): void {
    const u = this.#get(a.consumer)
    u.roll(this.#clock())
    u.setLease(a, out)
  }

  /** Consumer `id`'s use of its current windows, the other nodes' included (what admit() compares with the limits). */
  used (id: string): WindowCounts & { inFlight: number } {
    const u = this.#get(id)
    u.roll(this.#clock())
    return {
      minute: u.minute,
      day: u.day,
      requests: u.requests + u.otherRequests,
      minuteTokens: u.minuteTokens + u.reservedMinute + u.otherMinuteTokens,
      dayTokens: u.dayTokens + u.reservedDay + u.otherDayTokens,
      inFlight: u.inFlight,
    }
  }

  /** Consumers with a usage record now (keys and others). */
  get size (): number { return this.#usage.size }

  #get (id: string): Usage {
    let u = this.#usage.get(id)
    if (u !== undefined) return u
    if (!this.#keyed.has(id)) {
      if (this.#anon >= MAX_ANON) this.#trim()
      this.#anon++
    }
    u = new Usage()
    this.#usage.set(id, u)
    return u
  }

  /**
   * Forgets idle consumers without a key, oldest first, down to 3/4 of MAX_ANON: one that comes back starts
   * with fresh windows. Only reached with more than MAX_ANON distinct users or addresses in a day.
   */
  #trim (): void {
    for (const [id, u] of this.#usage) {
      if (this.#anon <= MAX_ANON * 0.75) break
      if (this.#keyed.has(id) || u.inFlight > 0) continue
      this.#usage.delete(id)
      this.#anon--
    }
  }
}

function refusal (consumer: string, reason: RejectReason, limit: string, used: number, seconds: number, held = false): Refusal {
  const message = held
    ? formatError('LB_ERR_GEN_BUDGET_HELD', { consumer, limit, used, seconds })
    : formatError('LB_ERR_GEN_OVER_BUDGET', { consumer, limit, used, seconds })
  return { status: ERRORS.LB_ERR_GEN_OVER_BUDGET.status, message, code: 'rate_limit_exceeded', retryAfter: seconds, reason, held, wait: false }
}
