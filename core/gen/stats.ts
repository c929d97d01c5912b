// Counters of the generation service, read by stats() (the Prometheus metrics
// of a later issue pull them at scrape time). Plain numbers in fixed-shape
// objects; one increment per finished request.

import type { ConsumerUsage } from './budget/usage.js'
import type { ModelSeries } from './dispatch/model-usage.js'
import type { GenView } from './view.js'

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
