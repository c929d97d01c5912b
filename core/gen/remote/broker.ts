// The control plane's side of remote model requests relayed in the data-plane
// workers ([generation] relay = "worker", core/gen/edge/): it stays the one
// authority for what every worker shares. A request start is one question
// (admit): the consumer's allowed models, its budget (Budget.admit, the
// cluster lease included), then the server, as remote/run.ts picks it (up,
// listing the model, loaded first, fewest in flight: RemoteServer.begin counts
// it). A failure before the first piece reached the client asks again (retry:
// the server is marked down or forgets the model as run.ts would) for the next
// server or fallback. The end is one message: the server's in-flight count,
// the budget's meter, GenStats requests and the per-model usage (TTFT, TPOT,
// tokens) are charged from it, as the service's own path charges them.
// A chain with a local model in it, or none a server lists, is answered "go
// the old way": the service's socket serves it whole (the worker's snapshot was stale).
// A request the worker could admit itself is not asked about: it admitted it
// on the shared budget records (core/gen/budget/ledger.ts), picked its server
// and counted it (core/gen/edge/link.ts pick) and says so (admitted); it is
// held from then on as if admitted here, its ticket taken over (Budget.adopt).

import { formatError } from '../../errors.js'
import type { Consumer } from '../budget/consumer.js'
import type { Meter } from '../budget/budget.js'
import { allowed, type GenEnv, modelNotFound } from '../dispatch/generation.js'
import type { UsageTap } from '../dispatch/model-usage.js'
import { type ApiError, isApiError } from '../dispatch/request.js'
import { addInFlight } from '../../shm/model-inflight.js'
import type { EdgeAdmit, EdgeAdmitted, EdgeAnswer, EdgeEnd, EdgeRetry, EdgeToControl, RemoteListing } from '../edge/messages.js'
import { outcomeOf } from '../stats.js'
import type { RemoteServer } from './server.js'

/** One admitted request between its admission and its end. */
interface Held {
  readonly meter: Meter
  readonly tap: UsageTap
  readonly endpoint: EdgeAdmit['endpoint']
  readonly names: readonly string[]
  /** The chain's model being tried, and its servers tried so far. */
  at: number
  tried: Set<RemoteServer>
  /** The server the request was sent to last (its in-flight count is held), and for which model. */
  server: RemoteServer | null
  model: string
  last: ApiError | null
  /** Why the chain's models' servers that are down are down (the 503's reasons). */
  readonly down: string[]
}

const GO_SERVICE: EdgeAnswer = Object.freeze({ go: 'service' })

export class RemoteBroker {
  readonly #env: GenEnv
  /** `${worker}:${id}` -> request */
  readonly #held = new Map<string, Held>()
  /** Relayed requests admitted, by where: asked here, or admitted by the worker itself (lb_gen_relay_admissions_total). */
  readonly admissions = { control_plane: 0, worker: 0 }

  constructor (env: GenEnv) {
    this.#env = env
  }

  /** The servers' listing now, then `cb` with each change of it (pushed to the workers). */
  watch (cb: (l: RemoteListing) => void): void {
    this.#env.remote.onListing = cb
    cb(this.#env.remote.listing())
  }

  /** A worker's message; `reply` answers admit and retry (once each). */
  handle (worker: number, m: EdgeToControl, reply: (id: number, a: EdgeAnswer) => void): void {
    switch (m.kind) {
      case 'admit':
        this.#admit(worker, m).then((a) => reply(m.id, a), (e: Error) => {
          this.#env.log.error('admitting a relayed request failed', { err: e.message })
          reply(m.id, { error: { status: 500, message: `internal error: ${e.message}` } })
        })
        break
      case 'admitted':
        try {
          this.#admitted(worker, m)
        } catch (e) {
          // the request runs anyway (the worker did not wait): its counts are given back (the server's, its
          // consumer's in flight and reservation), its end not counted
          this.#env.log.error('a request a worker admitted could not be held', { err: (e as Error).message })
          if (m.slot >= 0) addInFlight(this.#env.remote.slots!.i32, m.slot, -1)
          const who = this.#env.budget.consumerById(m.consumer)
          if (who !== null) this.#env.budget.adopt(who, m.reserve, m.minute, m.day).end(0)
        }
        break
      case 'retry':
        reply(m.id, this.#retry(worker, m))
        break
      case 'end':
        this.#end(worker, m)
        break
      default: {
        const never: never = m
        this.#env.log.error('unknown relay message', { msg: never })
      }
    }
  }

  /** A worker is gone: what it was relaying ended with it (cancelled). */
  dropWorker (worker: number): void {
    const prefix = `${worker}:`
    for (const key of [...this.#held.keys()]) {
      if (!key.startsWith(prefix)) continue
      this.#end(worker, { kind: 'end', id: Number(key.slice(prefix.length)), outcome: 'cancelled', refund: false, pieces: 0, first: 0n, end: process.hrtime.bigint(), result: null })
    }
  }

  async #admit (worker: number, a: EdgeAdmit): Promise<EdgeAnswer> {
    const env = this.#env
    const who: Consumer | null = env.budget.consumerById(a.consumer)
    if (who === null) return GO_SERVICE
    if (!allowed(env, who, a.model)) return this.#refuse(a.endpoint, modelNotFound(a.displayModel))
    await env.remote.ready()
    const names = env.remote.chain(a.model)
    for (const n of names) {
      // a local model anywhere in the chain: the service serves the request whole (it tries them in order)
      const local = env.remote.knows(n) ? env.catalog.peek(n) : await env.catalog.lookup(n)
      if (local !== null) return GO_SERVICE
    }
    if (!names.some((n) => env.remote.knows(n))) return GO_SERVICE
    let ticket = env.budget.admit(who, a.reserve)
    if (ticket instanceof Promise) ticket = await ticket
    if (isApiError(ticket)) return this.#refuse(a.endpoint, ticket)
    this.admissions.control_plane++
    const key = `${worker}:${a.id}`
    const h = this.#hold(key, a, env.budget.meterOf(who, ticket), names)
    return this.#next(key, h)
  }

  /** The request a worker admitted itself: its consumer charged, its server (counted by the worker) held. */
  #admitted (worker: number, a: EdgeAdmitted): void {
    const env = this.#env
    const who = env.budget.consumerById(a.consumer)
    const s = env.remote.servers.find((x) => x.conf.name === a.server)
    const names = env.remote.chain(a.model)
    // the worker has the same [generation] (static) and the listing this process sent: these hold
    if (who === null || s === undefined || s.slot(names[0]!) !== a.slot) throw new Error(`no consumer ${a.consumer} or server ${a.server} slot ${a.slot} here`)
    const ticket = env.budget.adopt(who, a.reserve, a.minute, a.day)
    this.admissions.worker++
    const h = this.#hold(`${worker}:${a.id}`, a, env.budget.meterOf(who, ticket), names)
    h.tried.add(s)
    h.server = s
    h.model = names[0]!
    h.tap.at(s.conf.name, h.model)
  }

  #hold (key: string, a: EdgeAdmit | EdgeAdmitted, meter: Meter, names: readonly string[]): Held {
    const h: Held = {
      meter,
      tap: this.#env.usage.tapAt(a.arrived, a.stream),
      endpoint: a.endpoint,
      names,
      at: 0,
      tried: new Set(),
      server: null,
      model: '',
      last: null,
      down: [],
    }
    this.#held.set(key, h)
    return h
  }

  /** The next server for the request (remote/run.ts's order), or its end when none is left. */
  #next (key: string, h: Held): EdgeAnswer {
    const env = this.#env
    while (h.at < h.names.length) {
      const name = h.names[h.at]!
      const s = env.remote.pick(name, h.tried)
      if (s !== null) {
        h.tried.add(s)
        s.begin(name)
        h.server = s
        h.model = name
        h.tap.at(s.conf.name, name)
        return { server: { name: s.conf.name, kind: s.conf.kind, url: s.conf.url, headers: s.headers() }, served: s.models.get(name)!.served }
      }
      for (const x of env.remote.servers) if (x.models.has(name) && !x.up) h.down.push(`${x.conf.name}: ${x.reason}`)
      h.at++
      h.tried = new Set()
    }
    // no server could start it: nothing ran, nothing is charged
    this.#held.delete(key)
    h.meter.refund()
    const e = h.last ?? { status: 503, message: formatError('LB_ERR_GEN_NO_SERVER', { model: h.names[0]!, reasons: h.down.join('; ') }), code: 'LB_ERR_GEN_NO_SERVER' }
    h.tap.end(outcomeOf(e.status))
    env.requests[h.endpoint][outcomeOf(e.status)]++
    return { error: e }
  }

  #retry (worker: number, r: EdgeRetry): EdgeAnswer {
    const key = `${worker}:${r.id}`
    const h = this.#held.get(key)
    if (h === undefined) return { error: r.error }
    const s = h.server
    if (s !== null) {
      s.end(h.model)
      h.server = null
      if (r.missing) s.forget(h.model)
      if (r.down) s.markDown(r.error.message)
      this.#env.log.warn('model server could not serve the request; trying the next', { server: s.conf.name, model: h.model, reason: r.error.message })
    }
    h.last = r.error
    return this.#next(key, h)
  }

  #end (worker: number, e: EdgeEnd): void {
    const key = `${worker}:${e.id}`
    const h = this.#held.get(key)
    if (h === undefined) return
    this.#held.delete(key)
    h.server?.end(h.model)
    if (e.refund) {
      h.meter.refund()
      h.tap.leave()
      return
    }
    this.#env.requests[h.endpoint][e.outcome]++
    h.meter.streamed(e.pieces)
    if (e.first !== 0n) h.tap.piece(e.first)
    if (e.result !== null) {
      h.tap.done(e.result.promptTokens, e.result.completionTokens, e.end)
      h.meter.used(e.result.promptTokens, e.result.completionTokens)
    }
    h.tap.end(e.outcome)
    h.meter.release() // charges what was streamed when there was no result (a no-op after used)
  }

  /** A refusal before any server was asked: counted as the service's route counts it. */
  #refuse (endpoint: EdgeAdmit['endpoint'], e: ApiError): EdgeAnswer {
    this.#env.requests[endpoint][outcomeOf(e.status)]++
    return { error: e }
  }
}
