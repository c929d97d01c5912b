// The generation service's keys and budgets, as the rest of core/gen sees
// them: who a request is (identify), whether it may use a model (mayUse),
// whether it may run now (admit), and the JobSink wrapper that charges it
// what it used when it ends (meter). One per service.
//
// The hook is the job's sink: every way a request ends (done, failed, and the
// cancel, time-out or full queue that detach the sink) releases its ticket
// exactly once. Local jobs and remote ones end in the same sink events, so one
// hook counts both.

import type { IncomingMessage } from 'node:http'
import type { GenAuthConf, GenKeyConf, GenLimits } from '../../config/generation.js'
import type { Logger } from '../../log.js'
import type { ApiError } from '../dispatch/request.js'
import type { JobResult } from '../local/protocol.js'
import type { JobSink } from '../local/scheduler.js'
import { anonSets, OTHER } from './conf.js'
import { type Consumer, Consumers } from './consumer.js'
import { type BudgetCluster, BudgetLease } from './lease.js'
import { Ledger, type Refusal, type Ticket } from './ledger.js'
import { BudgetRecords } from '../../shm/budget-records.js'
import { LEASE_WAIT_MS } from '../../shm/cluster-table.js'
import { UsageStats } from './usage.js'

/** What an admitted request used: each of its ends charges its ticket once (Budget.meterOf). */
export interface Meter {
  /** `n` pieces of the reply reached the client. */
  streamed (n: number): void
  /** The request's result: prompt (input) and completion (output) tokens. */
  used (input: number, output: number): void
  /** The request ended without a result: charged what was streamed. */
  release (): void
  /** The request never started anywhere: it is not counted at all. */
  refund (): void
}

/** A keyed consumer's use of its windows (the UTC minute for requests and minute tokens, the UTC day for day tokens). */
export interface BudgetView {
  consumer: string
  requests: number
  minuteTokens: number
  dayTokens: number
  inFlight: number
  /** 0 = no limit */
  limits: GenLimits
}

/** A job's sink that knows what its request used; release() ends a request whose sink was detached, refund() one that never ran. */
export interface MeteredSink extends JobSink {
  release (): void
  refund (): void
}

export class Budget {
  readonly #consumers: Consumers
  readonly #ledger: Ledger
  readonly #keyed: readonly string[]
  #lease: BudgetLease | null = null
  readonly usage: UsageStats

  /** `records`: the shared memory's (the workers admit on them too), or this thread's own (budget-records.ts). */
  constructor (auth: GenAuthConf, keys: readonly GenKeyConf[], records?: BudgetRecords, clock: () => number = Date.now) {
    this.#consumers = new Consumers(auth, keys)
    this.#keyed = this.#consumers.labels()
    this.#ledger = new Ledger(this.#keyed, clock, records ?? BudgetRecords.private(this.#keyed.length, anonSets(auth)))
    this.usage = new UsageStats([...this.#keyed, OTHER])
  }

  /** The keys' consumers' leases from the other nodes of a cluster (start() it): admissions go by them from then on. */
  leases (c: BudgetCluster, log: Logger): BudgetLease {
    this.#lease = new BudgetLease(c, this.#ledger, this.#consumers.keyedConsumers(), log)
    return this.#lease
  }

  /** Each keyed consumer's use of its current windows against its limits (the dashboard's and `show models`' budgets). */
  budgets (): BudgetView[] {
    return this.#consumers.keyedConsumers().map((c) => {
      const u = this.#ledger.used(c.id, c.limits)
      return { consumer: c.label, requests: u.requests, minuteTokens: u.minuteTokens, dayTokens: u.dayTokens, inFlight: u.inFlight, limits: c.limits }
    })
  }

  /** The request's consumer, or the 401 to answer (refused()). `trusted`: it came over the data plane's unix socket. */
  identify (req: IncomingMessage, trusted: boolean): Consumer | ApiError {
    return this.#consumers.identify(req, trusted)
  }

  /** The consumer a data-plane worker identified by its id (Consumers.byId). */
  consumerById (id: string): Consumer | null {
    return this.#consumers.byId(id)
  }

  /** A request answered 401 (routes that need no key, such as /health, serve one without a key and count nothing). */
  unauthorized (): void {
    this.usage.rejected(OTHER, 'unauthorized')
  }

  /** A request for a model its key may not use: counted; the caller answers as for a model that does not exist. */
  refusedModel (who: Consumer): void {
    this.usage.rejected(who.label, 'model')
  }

  /**
   * Admits a request reserving `reserve` tokens (the most lb knows it may use: Ledger.admit), or the 429 to answer
   * (with its Retry-After), counted by reason. In cluster mode a request past this node's lease waits for lease
   * rounds (a Promise: only then), for at most LEASE_WAIT_MS (core/shm/cluster-table.ts), each ended by a reply or
   * [cluster] max_wait.
   */
  admit (who: Consumer, reserve = 0): Ticket | Refusal | Promise<Ticket | Refusal> {
    const lease = this.#lease
    const leased = lease !== null && lease.active
    const t = this.#ledger.admit(who.id, who.limits, reserve, leased)
    if ('status' in t && t.wait && leased) return this.#waitLease(who, reserve, lease)
    return this.#counted(who, t)
  }

  /**
   * The ticket of a request a data-plane worker admitted itself on the shared records (its Ticket's minute and day,
   * `reserve`): counted as admitted here, charged here when it ends (meterOf).
   */
  adopt (who: Consumer, reserve: number, minute: number, day: number): Ticket {
    this.usage.admitted(who.label)
    return this.#ledger.ticket(who.id, who.limits, reserve, minute, day)
  }

  async #waitLease (who: Consumer, reserve: number, lease: BudgetLease): Promise<Ticket | Refusal> {
    let t: Ticket | Refusal
    const start = performance.now()
    do {
      await lease.need()
      // Redis judged down meanwhile: decided as without leases
      t = this.#ledger.admit(who.id, who.limits, reserve, lease.active)
    } while ('status' in t && t.wait && performance.now() - start < LEASE_WAIT_MS)
    return this.#counted(who, t)
  }

  #counted (who: Consumer, t: Ticket | Refusal): Ticket | Refusal {
    if ('status' in t) this.usage.rejected(who.label, t.reason)
    else this.usage.admitted(who.label)
    return t
  }

  /**
   * What one admitted request used, charged to its ticket once. A request that ends without a result (failed,
   * cancelled, timed out) is charged the pieces streamed to it so far, one token each (its prompt tokens are not
   * known then), so leaving before the end does not make it free.
   */
  meterOf (who: Consumer, ticket: Ticket): Meter {
    let streamed = 0
    let charged = false
    const charge = (input: number, output: number, observed: boolean): void => {
      if (charged) return
      charged = true
      ticket.end(input + output)
      // a request that streamed nothing before it failed is no observation of token usage
      if (observed) this.usage.used(who.label, input, output)
    }
    return {
      streamed: (n) => { streamed += n },
      used: (input, output) => charge(input, output, true),
      // after this tick: where a request's end is counted just before its result is written, the result wins
      release: () => queueMicrotask(() => charge(0, streamed, streamed > 0)),
      refund: () => {
        if (charged) return
        charged = true
        ticket.refund()
      },
    }
  }

  /** Wraps a local job's `sink` in the request's meter: its result charges the tokens it reports. */
  meter (who: Consumer, ticket: Ticket, sink: JobSink): MeteredSink {
    const m = this.meterOf(who, ticket)
    return {
      pieces (texts, ts) {
        m.streamed(texts.length)
        sink.pieces(texts, ts)
      },
      done (r: JobResult) {
        m.used(r.promptTokens, r.evalTokens)
        sink.done(r)
      },
      fail (status, message) {
        m.release()
        sink.fail(status, message)
      },
      release: () => m.release(),
      refund: () => m.refund(),
    }
  }
}
