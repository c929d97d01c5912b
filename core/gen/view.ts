// What the generation service serves, as the admin surfaces show it (the
// dashboard's /api/lb/generation, the runtime socket's `show models`): each
// model server, local first, with its models (loaded or not, in flight,
// requests, tokens), and each keyed consumer's budget use. Built on demand
// from what the service already holds; nothing here is on the request path.

import type { BudgetView } from './budget/budget.js'
import { LOCAL, type ModelSeries } from './dispatch/model-usage.js'
import type { GenEnv } from './dispatch/generation.js'

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

function modelView (model: string, loaded: boolean, s: ModelSeries | undefined): ModelView {
  let requests = 0
  if (s !== undefined) for (const n of Object.values(s.requests)) requests += n
  return { model, loaded, inFlight: s?.inFlight ?? 0, requests, inputTokens: s?.inputTokens ?? 0, outputTokens: s?.outputTokens ?? 0 }
}

/** Models a server lists, then the ones it served that it no longer lists (their counts stay visible). */
function models (series: ReadonlyMap<string, ModelSeries>, server: string, listed: readonly string[], loaded: (m: string) => boolean): ModelView[] {
  const out = listed.map((m) => modelView(m, loaded(m), series.get(`${server}\0${m}`)))
  for (const s of series.values()) if (s.server === server && !listed.includes(s.model)) out.push(modelView(s.model, loaded(s.model), s))
  return out
}

const sum = (ms: readonly ModelView[]): number => ms.reduce((n, m) => n + m.inFlight, 0)

export function genView (env: GenEnv): GenView {
  const series = env.usage.series
  const loadedHere = new Set(env.scheduler.loaded().map((m) => m.name))
  const local = models(series, LOCAL, env.catalog.known().sort(), (m) => loadedHere.has(m))
  const servers: ServerView[] = [{ name: LOCAL, kind: 'local', url: env.conf.socket, up: true, reason: '', inFlight: sum(local), models: local }]
  for (const s of env.remote.servers) {
    const ms = models(series, s.conf.name, [...s.models.keys()].sort(), (m) => s.isLoaded(m))
    servers.push({ name: s.conf.name, kind: s.conf.kind, url: s.conf.url, up: s.up, reason: s.reason, inFlight: sum(ms), models: ms })
  }
  return { servers, queueDepth: env.scheduler.queueDepth, budgets: env.budget.budgets() }
}
