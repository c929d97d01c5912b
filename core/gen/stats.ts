// Counters of the generation service and the shapes stats() hands the admin
// surfaces (/metrics, the dashboard, `show models`), which read them at their
// own pace. Plain numbers in fixed-shape objects; one increment per finished request.

import type { BudgetView } from './budget/budget.js'
import type { ConsumerUsage } from './budget/usage.js'

export const GEN_ENDPOINTS = ['generate', 'chat', 'embed', 'tags', 'show', 'ps', 'version', 'other'] as const
export type GenEndpoint = typeof GEN_ENDPOINTS[number]

/** ok: 2xx; client_error: other 4xx; busy: 503 queue full; error: 5xx; cancelled: client went away; timeout: request_timeout hit. */
export const GEN_OUTCOMES = ['ok', 'client_error', 'busy', 'error', 'cancelled', 'timeout'] as const
export type GenOutcome = typeof GEN_OUTCOMES[number]

export interface GenStats {
  /** Finished requests by endpoint and outcome. */
  requests: Record<GenEndpoint, Record<GenOutcome, number>>
  /** Tokens generated (eval_count) and prompt tokens evaluated, since start. */
  tokens: number
  promptTokens: number
  /** Jobs waiting for a sequence, and jobs running in the runner, now. */
  queueDepth: number
  inFlight: number
  /** Runner processes restarted after a crash, since start. */
  runnerRestarts: number
  /**
   * Requests that came in over the unix socket (from the data plane), since start: with [generation] relay =
   * "worker" a remote model's requests are relayed in the worker and never counted here (core/gen/edge/).
   */
  socketRequests: number
  /** Relayed requests admitted since start, by where: asked of the control plane, or by the worker itself (no limits). */
  relayAdmissions: { readonly control_plane: number, readonly worker: number }
  /** Per consumer label (the keys' consumers and "other"): admitted requests, token usage, refusals. */
  consumers: ReadonlyMap<string, ConsumerUsage>
  /** Per (server, model) that served a request: requests, tokens, in flight, TTFT and TPOT (dispatch/model-usage.ts). */
  models: ReadonlyMap<string, ModelSeries>
  /** The servers, their models and the budgets, built when called (view.ts). */
  view (): GenView
}

export function emptyRequests (): GenStats['requests'] {
  const r = {} as GenStats['requests']
  for (const e of GEN_ENDPOINTS) {
    const o = {} as Record<GenOutcome, number>
    for (const k of GEN_OUTCOMES) o[k] = 0
    r[e] = o
  }
  return r
}

export function outcomeOf (status: number): GenOutcome {
  if (status < 400) return 'ok'
  if (status === 503) return 'busy'
  if (status === 504) return 'timeout'
  return status < 500 ? 'client_error' : 'error'
}

/** One (server, model)'s usage (dispatch/model-usage.ts counts it). */
export interface ModelSeries {
  readonly server: string
  readonly model: string
  /** Requests a server took, by how they ended. */
  readonly requests: Record<GenOutcome, number>
  /** Prompt (input) and completion (output) tokens of the requests that ended with a result. */
  inputTokens: number
  outputTokens: number
  /** Requests running (or queued, locally) on this server for this model now. */
  inFlight: number
  /** Histogram blocks in seconds: one count per bucket, +Inf, then the sum (core/admin/metrics.ts reads them). */
  readonly ttft: Float64Array
  readonly tpot: Float64Array
}

export interface ModelView {
  model: string
  loaded: boolean
  inFlight: number
  /** Requests this server took for the model, since start, all outcomes. */
  requests: number
  inputTokens: number
  outputTokens: number
}

export interface ServerView {
  /** "local" or the configured server's name. */
  name: string
  /** local, ollama, openai or lb */
  kind: string
  url: string
  up: boolean
  /** Why it is down ('' when up). */
  reason: string
  /** Requests in flight to it now, all models. */
  inFlight: number
  models: ModelView[]
}

export interface GenView {
  servers: ServerView[]
  /** Local jobs waiting for a free sequence. */
  queueDepth: number
  budgets: BudgetView[]
}
