// What the generation service serves, as the admin surfaces show it (the
// dashboard's /api/lb/generation, the runtime socket's `show models`): each
// model server, local first, with its models (loaded or not, in flight,
// requests, tokens), and each keyed consumer's budget use. Built on demand
// from what the service already holds; nothing here is on the request path.

import type { Budget } from './budget/budget.js'
import { LOCAL, type ModelUsage } from './dispatch/model-usage.js'
import type { Scheduler } from './local/scheduler.js'
import type { ModelCatalog } from './models/catalog.js'
import type { RemoteRegistry } from './remote/registry.js'
import type { GenView, ModelSeries, ModelView, ServerView } from './stats.js'

/** What the view reads: the service's parts (dispatch/generation.ts GenEnv has them all). */
export interface ViewParts {
  readonly conf: { readonly socket: string }
  readonly catalog: ModelCatalog
  readonly scheduler: Scheduler
  readonly remote: RemoteRegistry
  readonly budget: Budget
  readonly usage: ModelUsage
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

export function genView (env: ViewParts): GenView {
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
