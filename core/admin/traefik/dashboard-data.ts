// lb's own read-only routes on the dashboard listener, for the page: the
// control plane's per-second history (the last 15 minutes, so a page opened
// during an incident shows what led to it) and the per-server detail that
// Traefik's API has no field for (admin state apart from health, request
// rate and share, errors, in flight, weight, last check and why a server is
// out). Traefik's own shapes stay untouched in dashboard-api.ts.
import type { ServiceConf } from '../../config/dynamic.js'
import { C_CONN_ERR, C_RESP_1XX, C_RESP_ERR, C_SELECTED } from '../../shm/layout.js'
import { sumServer } from '../../shm/counters.js'
import type { AdminContext } from '../context.js'
import { TEXT_ERRORS } from '../dashboard-page.js'
import type { Route, Surface } from '../http-server.js'
import { serverUrl, serverView } from '../server-view.js'

const CHECK_DESC: Record<string, string> = {
  UNK: 'not checked yet', INI: 'initializing', L4OK: 'connect passed', L4CON: 'connection refused or unreachable', L4TOUT: 'connect timed out',
  L7OK: 'passed', L7STS: 'wrong status', L7TOUT: 'no answer in time', L7RSP: 'invalid answer',
}

export interface ServerDetail {
  readonly service: string
  readonly server: string
  readonly url: string
  /** HAProxy's status word: UP, DOWN, MAINT, DRAIN, NOLB, "no check" */
  readonly state: string
  readonly admin: string
  readonly weight: number
  readonly initialWeight: number
  readonly inflight: number
  /** requests sent to it over the last second */
  readonly rate: number
  /** its part of the service's requests over the last second (all time when idle), percent */
  readonly share: number
  readonly requests: number
  /** 5xx answers plus connect and response errors, total and over the last second */
  readonly errors: number
  readonly errorRate: number
  /** last active check: HAProxy check status, HTTP code, ms, description; null when not checked */
  readonly check: { status: string, code: number, ms: number, desc: string } | null
  /** why it takes no traffic ('' when it does) */
  readonly reason: string
  readonly sinceChangeSec: number
}

function serverDetails (ctx: AdminContext, svc: ServiceConf): ServerDetail[] {
  const rows = svc.servers.map((srv): ServerDetail & { share: number } => {
    const v = serverView(ctx, svc, srv)
    const sum = (id: number): number => (v.slot < 0 ? 0 : sumServer(ctx.shm, v.slot, id))
    const s = ctx.sampler.servers.get(`${svc.name}/${srv.name}`)
    const check = srv.check ? { status: v.checkStatus, code: v.checkCode, ms: v.checkMs, desc: CHECK_DESC[v.checkStatus] ?? '' } : null
    let reason = ''
    if (v.admin === 'maint') reason = 'maintenance (set by an operator)'
    else if (v.admin === 'drain') reason = 'draining (set by an operator): no new requests'
    else if (!v.checkUp) reason = `health check failed: ${check === null ? '' : `${check.status}${check.code > 0 ? ` ${check.code}` : ''} ${check.desc}`}`.trim()
    else if (!v.healthy) reason = `passive: ${srv.maxFails} failures within ${srv.failTimeoutMs / 1000}s`
    else if (v.weight === 0) reason = 'weight 0'
    return {
      service: svc.name,
      server: srv.name,
      url: serverUrl(srv),
      state: v.status,
      admin: v.admin,
      weight: v.weight,
      initialWeight: srv.weight,
      inflight: v.inflight,
      rate: s?.rate.cur ?? 0,
      share: 0,
      requests: sum(C_SELECTED),
      errors: sum(C_RESP_1XX + 4) + sum(C_CONN_ERR) + sum(C_RESP_ERR),
      errorRate: s?.errors.cur ?? 0,
      check,
      reason,
      sinceChangeSec: v.sinceChangeSec,
    }
  })
  const rate = rows.reduce((n, r) => n + r.rate, 0)
  const total = rows.reduce((n, r) => n + r.requests, 0)
  for (const r of rows) r.share = Math.round(1000 * (rate > 0 ? r.rate / rate : total > 0 ? r.requests / total : 0)) / 10
  return rows
}

export function dashboardData (ctx: AdminContext): Surface {
  const routes: Route[] = [
    {
      method: 'GET', path: '/api/lb/history', mutates: false,
      help: 'per-second history of the last 15 minutes: requests, 4xx, 5xx, mean and p95 latency (ms), connections, in flight',
      handler: () => ({ status: 200, json: ctx.sampler.history() }),
    },
    {
      method: 'GET', path: '/api/lb/servers', mutates: false,
      help: 'every server: state, admin state, weight, rate, share, errors, in flight, last check and why it is out',
      handler: () => ({ status: 200, json: ctx.config().services.filter((s) => s.kind === 'proxy').flatMap((s) => serverDetails(ctx, s)) }),
    },
    {
      method: 'GET', path: '/api/lb/generation', mutates: false,
      help: 'the generation service: model servers, their models (loaded or not, in flight, requests, tokens), queue depth, each key\'s budget use',
      handler: () => {
        const g = ctx.gen()
        return { status: 200, json: g === null ? { enabled: false, servers: [], queueDepth: 0, budgets: [] } : { enabled: true, ...g.view() } }
      },
    },
  ]
  return {
    name: 'dashboard data (lb)',
    routes,
    ...TEXT_ERRORS,
  }
}
