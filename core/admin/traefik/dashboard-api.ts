// The dashboard API: Traefik v3 /api shapes over the running configuration.
// The runtime view is built per request from the applied config and shared
// memory: routers, services (with per-server UP/DOWN), middlewares, entry
// points. Providers: "file" for what the TOML defines, "api" for backends the
// config API owns. Lists are JSON arrays sorted by name with page/per_page and
// X-Next-Page; errors are {"message"} as text/plain, as Traefik's http.Error.
import type { Config } from '../../config/load.js'
import type { ServiceConf } from '../../config/dynamic.js'
import type { StickyCookieConf } from '../../config/sticky.js'
import { formatHostPort } from '../../config/static.js'
import type { AdminContext } from '../context.js'
import { VERSION } from '../context.js'
import { TEXT_ERRORS } from '../dashboard-page.js'
import type { Answer, Request, Route, Surface } from '../http-server.js'
import { serverUrl, serverView } from '../server-view.js'
import { goDuration, middlewareOptions, tcpRouters } from './traefik-view.js'
import { clusterOverview } from '../runtime/show-cluster.js'

type Obj = Record<string, unknown>

function traefikError (status: number, message: string): Answer {
  return { status, text: JSON.stringify({ message }) + '\n', contentType: 'text/plain; charset=utf-8' }
}

const STRATEGY: Record<string, string> = { roundrobin: 'wrr', leastconn: 'leastconn', source: 'hrw' }

export interface RuntimeView {
  readonly routers: Obj[]
  readonly services: Obj[]
  readonly middlewares: Obj[]
}

function provider (ctx: AdminContext, service: string): string {
  return ctx.store.apiOwned(service) ? 'api' : 'file'
}

/** Traefik's sticky.cookie fields (its names; empty ones left out, as Traefik's JSON omits them) */
function stickyView (k: StickyCookieConf): Obj {
  return {
    name: k.name,
    ...(k.secure ? { secure: true } : {}),
    ...(k.httpOnly ? { httpOnly: true } : {}),
    ...(k.sameSite !== '' ? { sameSite: k.sameSite } : {}),
    ...(k.maxAge !== 0 ? { maxAge: k.maxAge } : {}),
    path: k.path,
    ...(k.domain !== '' ? { domain: k.domain } : {}),
  }
}

function serviceObject (ctx: AdminContext, s: ServiceConf, usedBy: string[]): Obj {
  const p = provider(ctx, s.name)
  const base: Obj = { status: 'enabled', usedBy, name: `${s.name}@${p}`, provider: p }
  const g = s.group
  if (g !== null) {
    if (g.kind === 'weighted') return { weighted: { services: g.services.map((x) => ({ name: x.name, weight: x.weight })) }, ...base, type: 'weighted' }
    if (g.kind === 'failover') return { failover: { service: g.service, fallback: g.fallback }, ...base, type: 'failover' }
    return { mirroring: { service: g.service, mirrors: g.mirrors.map((m) => ({ name: m.name, percent: m.percent })), maxBodySize: g.maxBodyBytes }, ...base, type: 'mirroring' }
  }
  if (s.kind !== 'proxy') return { ...base, type: s.kind }
  const serverStatus: Record<string, string> = {}
  const servers = s.servers.map((srv) => {
    const url = serverUrl(srv)
    serverStatus[url] = serverView(ctx, s, srv).traefik
    return { url, weight: srv.weight }
  })
  const hc = s.healthCheck
  const anyChecked = s.servers.some((x) => x.check)
  return {
    loadBalancer: {
      servers,
      strategy: STRATEGY[s.balance],
      passHostHeader: true,
      ...(s.sticky !== null ? { sticky: { cookie: stickyView(s.sticky) } } : {}),
      ...(anyChecked ? { healthCheck: { ...(hc.type === 'grpc' ? { mode: 'grpc' } : {}), path: hc.path, interval: goDuration(hc.intervalMs), timeout: goDuration(hc.timeoutMs), status: hc.status } } : {}),
    },
    ...base,
    type: 'loadbalancer',
    serverStatus,
  }
}

/** status 'enabled', or what the middleware's instances report (a provider they cannot reach is a 'warning' with its message) */
function runtimeStatus (ctx: AdminContext, name: string): Obj {
  const s = ctx.middlewareStatus?.(name) ?? null
  return s === null ? { status: 'enabled' } : { status: s.status, message: s.message }
}

/** Traefik's TCP services: the services lb's TCP entry points forward to, servers by address. */
function tcpServices (ctx: AdminContext, config: Config): Obj[] {
  const routers = tcpRouters(config)
  return config.services.filter((s) => s.kind === 'proxy' && routers.some((r) => r.service === s.name)).map((s) => {
    const p = provider(ctx, s.name)
    const serverStatus: Record<string, string> = {}
    const servers = s.servers.map((srv) => {
      const address = srv.path !== '' ? `unix:${srv.path}` : formatHostPort(srv.host, srv.port)
      serverStatus[address] = serverView(ctx, s, srv).traefik
      return { address, weight: srv.weight }
    })
    const usedBy = routers.filter((r) => r.service === s.name).map((r) => r.name as string).sort()
    return { loadBalancer: { servers }, status: 'enabled', usedBy, name: `${s.name}@${p}`, provider: p, type: 'loadbalancer', serverStatus }
  }).sort((a, b) => (a.name < b.name ? -1 : 1))
}

/** The Traefik runtime view of `config`: dynamic config plus status and usedBy. */
export function runtimeView (ctx: AdminContext, config: Config): RuntimeView {
  const routers = config.routers.map((r): Obj => {
    const sp = provider(ctx, r.service)
    return {
      entryPoints: [...r.entrypoints],
      ...(r.middlewares.length > 0 ? { middlewares: [...r.middlewares] } : {}),
      service: sp === 'file' ? r.service : `${r.service}@${sp}`,
      rule: r.rule,
      // the priority routing uses, as Traefik's API shows it once the router is built (its rule's length when not set)
      ...(r.effectivePriority !== 0 ? { priority: r.effectivePriority } : {}),
      // Traefik's router tls: the resolver and the extra names (its domains[].main/sans)
      ...(r.tls !== null ? { tls: { certResolver: r.tls.certResolver, ...(r.tls.domains.length > 0 ? { domains: [{ main: r.tls.domains[0], sans: r.tls.domains.slice(1) }] } : {}) } } : {}),
      status: 'enabled',
      using: [...r.entrypoints],
      name: `${r.name}@file`,
      provider: 'file',
      priorityStr: String(r.effectivePriority),
    }
  })
  const services = config.services.map((s) => serviceObject(ctx, s, config.routers.filter((r) => r.service === s.name).map((r) => `${r.name}@file`).sort()))
  const middlewares = config.middlewares.map((m): Obj => ({
    [m.type]: middlewareOptions(m),
    ...runtimeStatus(ctx, m.name),
    usedBy: config.routers.filter((r) => r.middlewares.includes(m.name) || r.chain.includes(m.name)).map((r) => `${r.name}@file`).sort(),
    name: `${m.name}@file`,
    provider: 'file',
    type: m.type.toLowerCase(),
  }))
  const byName = (a: Obj, b: Obj): number => (a.name as string) < (b.name as string) ? -1 : (a.name as string) > (b.name as string) ? 1 : 0
  return { routers: routers.sort(byName), services: services.sort(byName), middlewares: middlewares.sort(byName) }
}

const SORT_KEYS: Record<string, (o: Obj) => string | number> = {
  name: (o) => o.name as string,
  provider: (o) => o.provider as string,
  status: (o) => o.status as string,
  priority: (o) => (o.priority as number | undefined) ?? 0,
  rule: (o) => (o.rule as string | undefined) ?? '',
  service: (o) => (o.service as string | undefined) ?? '',
  type: (o) => (o.type as string | undefined) ?? '',
  entryPoints: (o) => ((o.entryPoints as string[] | undefined) ?? []).join(','),
}

/** Traefik's list handling: filters, sort, then page/per_page with X-Next-Page. */
function list (req: Request, items: Obj[]): Answer {
  let out = items
  const search = req.query.get('search')
  if (search !== null && search !== '') {
    const q = search.toLowerCase()
    out = out.filter((o) => JSON.stringify([o.name, o.rule, o.service, o.entryPoints, o.middlewares]).toLowerCase().includes(q))
  }
  const status = req.query.get('status')
  if (status !== null && status !== '') out = out.filter((o) => o.status === status)
  const svc = req.query.get('serviceName')
  if (svc !== null && svc !== '') out = out.filter((o) => o.service === svc || `${o.service as string}@file` === svc || o.service === svc.replace(/@file$/, ''))
  const mw = req.query.get('middlewareName')
  if (mw !== null && mw !== '') out = out.filter((o) => ((o.middlewares as string[] | undefined) ?? []).some((m) => m === mw || `${m}@file` === mw))
  const sortBy = req.query.get('sortBy') ?? 'name'
  // own keys only: ?sortBy=__proto__ must not find Object.prototype's
  const key = (Object.hasOwn(SORT_KEYS, sortBy) ? SORT_KEYS[sortBy] : undefined) ?? SORT_KEYS.name!
  const dir = req.query.get('direction') === 'desc' ? -1 : 1
  out = [...out].sort((a, b) => {
    const x = key(a)
    const y = key(b)
    return (x < y ? -1 : x > y ? 1 : (a.name as string) < (b.name as string) ? -1 : 1) * dir
  })
  const perPage = intParam(req, 'per_page', 100)
  const page = intParam(req, 'page', 1)
  if (perPage === null || page === null) return traefikError(400, `invalid request: page: ${req.query.get('page') ?? 1}, per_page: ${req.query.get('per_page') ?? 100}`)
  const start = (page - 1) * perPage
  if (start !== 0 && start >= out.length) return traefikError(400, `invalid request: page: ${page}, per_page: ${perPage}`)
  const next = page * perPage < out.length ? page + 1 : 1
  return { status: 200, json: out.slice(start, start + perPage), headers: { 'x-next-page': String(next) } }
}

function intParam (req: Request, name: string, def: number): number | null {
  const v = req.query.get(name)
  if (v === null || v === '') return def
  return /^\d+$/.test(v) && Number(v) >= 1 ? Number(v) : null
}

function one (items: Obj[], id: string, kind: string): Answer {
  const found = items.find((o) => o.name === id) ?? (id.includes('@') ? undefined : items.find((o) => (o.name as string).split('@')[0] === id))
  return found === undefined ? traefikError(404, `${kind} not found: ${id}`) : { status: 200, json: found }
}

function entrypoints (config: Config): Obj[] {
  const t = config.timeouts
  return config.entrypoints.map((e) => ({
    address: formatHostPort(e.host, e.port),
    transport: {
      lifeCycle: { graceTimeOut: goDuration(config.global.drainTimeoutMs) },
      respondingTimeouts: { readTimeout: goDuration(t.clientMs), idleTimeout: '10s' },
    },
    forwardedHeaders: {},
    http: {},
    name: e.name,
  })).sort((a, b) => (a.name < b.name ? -1 : 1))
}

export function dashboardApi (ctx: AdminContext): Surface {
  const view = (): RuntimeView => runtimeView(ctx, ctx.config())
  const r = (path: string, help: string, handler: (req: Request) => Answer): Route => ({ method: 'GET', path, help, mutates: false, handler })
  const counts = (xs: Obj[]): Obj => ({ total: xs.length, warnings: xs.filter((x) => x.status === 'warning').length, errors: xs.filter((x) => x.status === 'disabled').length })
  const routes: Route[] = [
    r('/api/http/routers', 'routers (Traefik shape), ?page ?per_page ?search ?status ?serviceName ?middlewareName ?sortBy ?direction', (req) => list(req, view().routers)),
    r('/api/http/routers/{id}', 'one router by name@provider', (req) => one(view().routers, req.params.id!, 'router')),
    r('/api/http/services', 'services with serverStatus UP/DOWN per server', (req) => list(req, view().services)),
    r('/api/http/services/{id}', 'one service by name@provider', (req) => one(view().services, req.params.id!, 'service')),
    r('/api/http/middlewares', 'middlewares', (req) => list(req, view().middlewares)),
    r('/api/http/middlewares/{id}', 'one middleware by name@provider', (req) => one(view().middlewares, req.params.id!, 'middleware')),
    r('/api/tcp/routers', 'TCP routers: one per TCP entry point', (req) => list(req, tcpRouters(ctx.config()))),
    r('/api/tcp/routers/{id}', 'one TCP router', (req) => one(tcpRouters(ctx.config()), req.params.id!, 'router')),
    r('/api/tcp/services', 'TCP services with serverStatus per server', (req) => list(req, tcpServices(ctx, ctx.config()))),
    r('/api/tcp/services/{id}', 'one TCP service', (req) => one(tcpServices(ctx, ctx.config()), req.params.id!, 'service')),
    r('/api/tcp/middlewares', 'TCP middlewares (lb has none: always empty)', (req) => list(req, [])),
    r('/api/tcp/middlewares/{id}', 'one TCP middleware', (req) => one([], req.params.id!, 'middleware')),
    r('/api/udp/routers', 'UDP routers (lb has no UDP: always empty)', (req) => list(req, [])),
    r('/api/udp/routers/{id}', 'one UDP router', (req) => one([], req.params.id!, 'router')),
    r('/api/udp/services', 'UDP services (lb has no UDP: always empty)', (req) => list(req, [])),
    r('/api/udp/services/{id}', 'one UDP service', (req) => one([], req.params.id!, 'service')),
    r('/api/entrypoints', 'entry points', (req) => list(req, entrypoints(ctx.config()))),
    r('/api/entrypoints/{id}', 'one entry point', (req) => one(entrypoints(ctx.config()), req.params.id!, 'entry point')),
    r('/api/certificates', 'ACME certificates: resolver, names, status, issuer, expiry, renewal, failures (lb\'s own; Traefik has none)',
      (req) => list(req, (ctx.certificates?.status() ?? []).map((c) => ({ ...c, name: `${c.domains[0] ?? ''}@${c.resolver}` })))),
    r('/api/overview', 'counts per kind, features, providers', () => {
      const v = view()
      const zero = { total: 0, warnings: 0, errors: 0 }
      const c = ctx.config()
      return {
        status: 200,
        json: {
          http: { routers: counts(v.routers), services: counts(v.services), middlewares: counts(v.middlewares) },
          tcp: { routers: counts(tcpRouters(c)), services: counts(tcpServices(ctx, c)), middlewares: zero },
          udp: { routers: zero, services: zero },
          // Traefik names its tracing exporter's section ("OTLP" in v3): lb's one is [tracing.otlp.http]
          features: { tracing: c.tracing === null ? '' : 'OTLP', metrics: c.dashboard.metrics ? 'Prometheus' : '', accessLog: c.global.accessLog !== 'off' },
          providers: v.services.some((s) => s.provider === 'api') ? ['File', 'API'] : ['File'],
          // lb's own: [cluster] (absent without it, so a single node's overview is Traefik's shape)
          ...(ctx.cluster() === null ? {} : { cluster: clusterOverview(ctx) }),
        },
      }
    }),
    r('/api/rawdata', 'the whole runtime view as maps keyed by name@provider', () => {
      const v = view()
      const map = (xs: Obj[]): Obj => Object.fromEntries(xs.map((x) => [x.name as string, x]))
      const c = ctx.config()
      const tcp = tcpRouters(c)
      // Traefik leaves empty sections out (omitempty)
      const tcpPart = tcp.length === 0 ? {} : { tcpRouters: map(tcp), tcpServices: map(tcpServices(ctx, c)) }
      return { status: 200, json: { routers: map(v.routers), middlewares: map(v.middlewares), services: map(v.services), ...tcpPart } }
    }),
    r('/api/version', 'version and start date', () => ({ status: 200, json: { Version: VERSION, Codename: 'lb', startDate: new Date(ctx.startedAt).toISOString() } })),
  ]
  return {
    name: 'dashboard API (Traefik v3 shapes)',
    routes,
    ...TEXT_ERRORS,
    internalError: (err) => traefikError(500, err.message),
  }
}
