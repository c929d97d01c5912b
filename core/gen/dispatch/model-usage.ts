// Per (server, model) usage of the generation service: requests by outcome,
// prompt and completion tokens, requests in flight, and the time to first
// token and time per output token histograms (OpenTelemetry GenAI's
// gen_ai.server.time_to_first_token and gen_ai.server.time_per_output_token).
// Read by /metrics, the dashboard and `show models` at their own pace.
//
// Labels are bounded: server is "local" or a configured server's name, model
// is the catalog's name of a local model or a name a configured server lists.
// A series is made only once a server takes a request for a model it has, so
// a name a client invents never becomes one (it gets a 404 first).
//
// One UsageTap per request, fed from the request's ReplyWriter (pieces, done)
// and from where its end is counted (dispatch/generation.ts): the same events
// for local and remote replies, so both are counted by one hook.

import type { IncomingMessage } from 'node:http'
import { observe } from '../budget/usage.js'
import { GEN_OUTCOMES, type GenOutcome, type ModelSeries } from '../stats.js'

/** Seconds: OpenTelemetry's advice for gen_ai.server.time_to_first_token. */
export const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10] as const
/** Seconds: OpenTelemetry's advice for gen_ai.server.time_per_output_token. */
export const TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5] as const

/** The server label of models this process runs. */
export const LOCAL = 'local'

/** When each request reached the generation service (set by the HTTP handler; weak: gone with the request). */
const arrivals = new WeakMap<IncomingMessage, bigint>()

export function markArrival (req: IncomingMessage): void {
  arrivals.set(req, process.hrtime.bigint())
}

const seconds = (ns: bigint): number => Number(ns) / 1e9

export class ModelUsage {
  /** `${server}\0${model}` -> series, in the order they were first used. */
  readonly series = new Map<string, ModelSeries>()

  of (server: string, model: string): ModelSeries {
    const k = `${server}\0${model}`
    let s = this.series.get(k)
    if (s === undefined) {
      const requests = {} as Record<GenOutcome, number>
      for (const o of GEN_OUTCOMES) requests[o] = 0
      s = { server, model, requests, inputTokens: 0, outputTokens: 0, inFlight: 0, ttft: new Float64Array(TTFT_BUCKETS.length + 2), tpot: new Float64Array(TPOT_BUCKETS.length + 2) }
      this.series.set(k, s)
    }
    return s
  }

  /** The tap of one request of `req`; `stream`: its reply is streamed (its first token reaches the client with the first piece). */
  tap (req: IncomingMessage, stream: boolean): UsageTap {
    return new UsageTap(this, arrivals.get(req) ?? process.hrtime.bigint(), stream)
  }

  /** The tap of a request that arrived at `arrived` (process.hrtime.bigint(), the same clock in every thread: a worker's relay). */
  tapAt (arrived: bigint, stream: boolean): UsageTap {
    return new UsageTap(this, arrived, stream)
  }
}

/** One request's usage: the server and model that took it, its first piece, its tokens, its end. */
export class UsageTap {
  readonly #usage: ModelUsage
  readonly #arrived: bigint
  readonly #stream: boolean
  #series: ModelSeries | null = null
  /** When the first piece of the reply was written (0n: none yet). */
  #first = 0n
  #ended = false
  #measured = false

  constructor (usage: ModelUsage, arrived: bigint, stream: boolean) {
    this.#usage = usage
    this.#arrived = arrived
    this.#stream = stream
  }

  /** `server` took the request for `model` (a remote fallback moves it: in flight follows). */
  at (server: string, model: string): void {
    if (this.#ended) return
    if (this.#series !== null) this.#series.inFlight--
    this.#series = this.#usage.of(server, model)
    this.#series.inFlight++
  }

  /** A piece of the reply was written (`at`: when, process.hrtime.bigint(); a worker's relay says when it wrote it). */
  piece (at = process.hrtime.bigint()): void {
    if (this.#first !== 0n) return
    this.#first = at
    if (this.#stream) this.#ttft(this.#first)
  }

  /**
   * The result: its tokens, TTFT for an unstreamed reply (the client's first token comes with it) and TPOT
   * = (now - first piece) / (completion tokens - 1) when there were pieces and more than one token.
   */
  done (input: number, output: number, now = process.hrtime.bigint()): void {
    const s = this.#series
    if (s === null || this.#measured) return
    this.#measured = true
    s.inputTokens += input
    s.outputTokens += output
    if (!this.#stream || this.#first === 0n) this.#ttft(now)
    if (this.#first !== 0n && output > 1) observe(s.tpot, seconds(now - this.#first) / (output - 1), TPOT_BUCKETS)
  }

  /** The request ended with `outcome` (once; done() may follow: an end is counted before its result is written). */
  end (outcome: GenOutcome): void {
    if (this.#ended) return
    this.#ended = true
    const s = this.#series
    if (s === null) return
    s.requests[outcome]++
    s.inFlight--
  }

  /** The request ends served by no server (refused over budget, an unload): it leaves where it was tried, counted nowhere. */
  leave (): void {
    if (this.#ended) return
    this.#ended = true
    if (this.#series !== null) this.#series.inFlight--
    this.#series = null
  }

  #ttft (at: bigint): void {
    if (this.#series !== null) observe(this.#series.ttft, seconds(at - this.#arrived), TTFT_BUCKETS)
  }
}
