// What each consumer has used: requests and tokens in fixed windows (the UTC
// minute for rpm and tpm, the UTC day for tpd) and requests in flight.
//
// Exact across the data plane's workers: every worker forwards generation
// requests to this one service in the control plane, so these in-process
// counters see every request of the node; no shared memory is needed. Across
// the nodes of a cluster, a key's consumer is also charged what the other
// nodes reported for the same windows at the last exchange (exchange.ts):
// approximate, see there.
//
// Fixed windows, not sliding: they are exact, cost two integers per limit, and
// give a Retry-After that is the true wait (the seconds to the window's end).
// The price: a consumer can use a minute's budget at the end of one minute and
// again at the start of the next.
//
// Tokens are known only when a request ends (prompt + completion, from its
// result). A request is admitted while its consumer's windows are under their
// budgets, then charged what it used: a budget is overshot by at most the
// tokens of the requests in flight when it filled (one request's worth each).

import type { GenLimits } from '../../config/generation.js'
import { ERRORS, formatError } from '../../errors.js'
import type { ApiError } from '../dispatch/request.js'

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000
/** Consumers without a key (users, addresses) remembered at most; past it, idle ones are forgotten, oldest first. */
export const MAX_ANON = 100_000

/** Why a request was refused (the `reason` label of lb_gen_consumer_rejections_total). */
export const REJECT_REASONS = ['unauthorized', 'model', 'rpm', 'tpm', 'tpd', 'in_flight'] as const
export type RejectReason = typeof REJECT_REASONS[number]

class Usage {
  /** index of the current minute (ms / 60000) and day (ms / 86400000), UTC */
  minute = 0
  day = 0
  requests = 0
  minuteTokens = 0
  dayTokens = 0
  inFlight = 0
  /** the other nodes' counts of the same windows (cluster mode; 0 otherwise) */
  otherRequests = 0
  otherMinuteTokens = 0
  otherDayTokens = 0

  roll (now: number): void {
    const m = Math.floor(now / MINUTE_MS)
    if (m !== this.minute) {
      this.minute = m
      this.requests = 0
      this.minuteTokens = 0
      this.otherRequests = 0
      this.otherMinuteTokens = 0
    }
    const d = Math.floor(now / DAY_MS)
    if (d !== this.day) {
      this.day = d
      this.dayTokens = 0
      this.otherDayTokens = 0
    }
  }
}

/** A consumer's counts in its current windows: this node's (Ledger.local) or the other nodes' (Ledger.setOthers). */
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

export interface Refusal extends ApiError { reason: RejectReason }

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

  /** Admits a request of consumer `id` under `limits`, or says why not. */
  admit (id: string, limits: GenLimits): Ticket | Refusal {
    const now = this.#clock()
    const u = this.#get(id)
    u.roll(now)
    const nextMinute = (u.minute + 1) * MINUTE_MS
    if (limits.maxInFlight > 0 && u.inFlight >= limits.maxInFlight) {
      return refusal(id, 'in_flight', `max_in_flight = ${limits.maxInFlight} requests at once`, u.inFlight, 1)
    }
    const requests = u.requests + u.otherRequests
    if (limits.rpm > 0 && requests >= limits.rpm) {
      return refusal(id, 'rpm', `rpm = ${limits.rpm} requests per minute`, requests, secondsTo(nextMinute, now))
    }
    const minuteTokens = u.minuteTokens + u.otherMinuteTokens
    if (limits.tpm > 0 && minuteTokens >= limits.tpm) {
      return refusal(id, 'tpm', `tpm = ${limits.tpm} tokens per minute`, minuteTokens, secondsTo(nextMinute, now))
    }
    const dayTokens = u.dayTokens + u.otherDayTokens
    if (limits.tpd > 0 && dayTokens >= limits.tpd) {
      return refusal(id, 'tpd', `tpd = ${limits.tpd} tokens per UTC day`, dayTokens, secondsTo((u.day + 1) * DAY_MS, now))
    }
    u.requests++
    u.inFlight++
    const minute = u.minute
    let ended = false
    return {
      end: (tokens) => {
        if (ended) return
        ended = true
        u.inFlight--
        // charged to the windows the request ends in
        u.roll(this.#clock())
        u.minuteTokens += tokens
        u.dayTokens += tokens
      },
      refund: () => {
        if (ended) return
        ended = true
        u.inFlight--
        u.roll(this.#clock())
        if (u.minute === minute) u.requests--
      },
    }
  }

  /** This node's counts of consumer `id` in the current windows (what the cluster exchange reports). */
  local (id: string): WindowCounts {
    const u = this.#get(id)
    u.roll(this.#clock())
    return { minute: u.minute, day: u.day, requests: u.requests, minuteTokens: u.minuteTokens, dayTokens: u.dayTokens }
  }

  /** What the other nodes used of consumer `id`'s windows; counts of windows that are over by now are dropped. */
  setOthers (id: string, o: WindowCounts): void {
    const u = this.#get(id)
    u.roll(this.#clock())
    if (o.minute === u.minute) {
      u.otherRequests = o.requests
      u.otherMinuteTokens = o.minuteTokens
    }
    if (o.day === u.day) u.otherDayTokens = o.dayTokens
  }

  /** Consumer `id`'s use of its current windows, the other nodes' included (what admit() compares with the limits). */
  used (id: string): WindowCounts & { inFlight: number } {
    const u = this.#get(id)
    u.roll(this.#clock())
    return {
      minute: u.minute,
      day: u.day,
      requests: u.requests + u.otherRequests,
      minuteTokens: u.minuteTokens + u.otherMinuteTokens,
      dayTokens: u.dayTokens + u.otherDayTokens,
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

function refusal (consumer: string, reason: RejectReason, limit: string, used: number, seconds: number): Refusal {
  const message = formatError('LB_ERR_GEN_OVER_BUDGET', { consumer, limit, used, seconds })
  return { status: ERRORS.LB_ERR_GEN_OVER_BUDGET.status, message, code: 'rate_limit_exceeded', retryAfter: seconds, reason }
}
