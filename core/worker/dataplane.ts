// One generation of a worker's data plane: routes compiled per entry point,
// services with their balancers and connection pools, middleware chains.
// Built from a frozen config snapshot whenever the control plane sends one;
// requests in flight finish on the generation they started on.
import { performance } from 'node:perf_hooks' // the global `performance` is a lazy accessor: a getter call on every use
import type { Config } from '../config/load.js'
import type { RouterConf } from '../config/dynamic.js'
import { type ApiShape, apiOfPath, shapeAnswer } from '../api-errors.js'
import { type ErrorCode, ERRORS, formatError } from '../errors.js'
import type { Logger } from '../log.js'
import { now } from '../clock.js'
import { type Shm, G_REQUESTS, G_RESP_1XX, G_WRITING, G_BYTES_OUT, statusClass } from '../shm/layout.js'
import type { Stripe } from '../shm/counters.js'
import { recordHeadIn, recordRequest, recordSent } from '../shm/request-stats.js'
import { HANDLED, type Hooks } from '../plugin.js'
import { type PluginHost, createMiddleware } from './request/middleware.js'
import type { Slots } from '../protocol.js'
import type { AccessLog } from './access-log.js'
import { EMPTY_CHAIN, compileChain, runRequestHooks } from './request/chain.js'
import type { ClientResponse } from './transport/client.js'
import type { Ctx } from './request/context.js'
import { ProxyExchange } from './proxy/proxy.js'
import { WsTunnel } from './ws/ws-proxy.js'
import { type CompiledRoute, compileRoutes, matchRoute } from './request/router.js'
import { checkRequest } from './request/request-check.js'
import { checkHost } from './request/request-host.js'
import { DEFAULT_POLICY, type PathPolicy, compilePathPolicy, normalizePath } from './request/request-path.js'
import { renderStatus } from './status-page.js'
import { acmeAnswer } from './tls/acme-challenge.js'
import { H2Exchange } from './proxy/h2-proxy.js'
import { leafTarget } from './proxy/service-group.js'
import { Mirrors } from './proxy/mirror.js'
import { httpRequestHead } from './proxy/forward-head.js'
import { grpcCode, grpcHeaders, isGrpc, isGrpcWeb } from './proxy/grpc-status.js'
import { type FilterHost, type Page, ClientFilter, applyFilters } from './request/client-filter.js'
import { fetchPage } from './proxy/page-fetch.js'
import type { ExchangeHost, RouteTarget, ServiceGroupRuntime, ServiceRuntime } from './runtime.js'
import type { SpanExporter } from './trace/exporter.js'
import { Tracer } from './trace/tracer.js'
import { type PoolCache, buildService } from './service-runtime.js'
import { Edge } from '../gen/edge/edge.js'
import type { EdgeLink } from '../gen/edge/link.js'
import { HeldBody } from './request/held-body.js'

export type { RouteTarget, ServerRuntime, ServiceRuntime } from './runtime.js'

const TEXT = ['content-type', 'text/plain'] as const
const HEALTH_BODY = 'OK\n'
const OPTIONS_ANY = ['allow', 'GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH'] as const

export class DataPlane implements ExchangeHost, FilterHost {
  readonly conf: Config
  readonly shm: Shm
  readonly stripe: Stripe
  readonly log: Logger
  readonly accessLog: AccessLog
  /** compiled routes by entry point index (Ctx.epSlot) */
  readonly #routes: Array<Array<CompiledRoute<RouteTarget>>> = []
  readonly #epIndex = new Map<string, number>()
  /** the path each entry point answers itself ('' = none), by entry point index */
  readonly #health: string[] = []
  /** request-path settings by entry point index */
  readonly #pathPolicies: PathPolicy[] = []
  readonly services = new Map<string, ServiceRuntime>()
  /** this generation's middleware instances by name; retired (retireMiddlewares) when it is replaced */
  readonly middlewares = new Map<string, Hooks>()
  /** routers whose service is the generation endpoint: lb's own refusals on them take the caller's API shape */
  readonly #genRouters = new Set<string>()
  /** [tracing] on: each request's span (core/worker/trace/); null when off */
  readonly #tracer: Tracer | null
  /** remote model requests relayed in this worker ([generation] relay = "worker", core/gen/edge/); null: all go to the service */
  readonly #edge: Edge | null

  /** `spans`: the worker's span exporter (configured for conf.tracing by the caller); null: no tracing */
  constructor (conf: Config, slots: Slots, shm: Shm, stripe: Stripe, log: Logger, accessLog: AccessLog, pools: PoolCache, host: PluginHost,
    spans: SpanExporter | null = null, edge: EdgeLink | null = null) {
    this.conf = conf
    this.shm = shm
    this.stripe = stripe
    this.log = log
    this.accessLog = accessLog
    this.#tracer = conf.tracing !== null && spans !== null ? new Tracer(conf.tracing, spans, this.services) : null
    const used = new Set<string>()
    for (const s of conf.services) this.services.set(s.name, buildService(conf, shm, s, slots, pools, used))
    for (const s of this.services.values()) s.group?.link(this.services)
    // a pool survives a reload while its server and settings are unchanged (its keep-alive connections are kept)
    for (const [key, pool] of pools) {
      if (!used.has(key)) {
        pool.close()
        pools.delete(key)
      }
    }
    const hooks = this.middlewares
    for (const m of conf.middlewares) hooks.set(m.name, createMiddleware(m, conf.baseDir, conf.global.pluginsDir, shm, log, host))
    const target = (r: RouterConf): RouteTarget => {
      const service = this.services.get(r.service) ?? null
      return {
        service,
        chain: r.chain.length === 0 ? EMPTY_CHAIN : compileChain(r.chain.map((name) => ({ name, hooks: hooks.get(name)! }))),
        routerSlot: slots.routers[r.name] ?? -1,
        leaves: service?.group != null ? new Map() : null,
      }
    }
    for (const r of conf.routers) if (this.services.get(r.service)?.conf.kind === 'generate') this.#genRouters.add(r.name)
    const gen = conf.generation
    this.#edge = edge !== null && gen.enabled && gen.relay === 'worker' && gen.servers.length > 0 && conf.services.some((s) => s.kind === 'generate')
      ? new Edge(gen, edge, (ctx) => this.finish(ctx as Ctx))
      : null
    conf.entrypoints.forEach((ep, i) => {
      this.#epIndex.set(ep.name, i)
      this.#health[i] = ep.health
      this.#routes[i] = compileRoutes(conf.routers, ep.name, target)
      this.#pathPolicies[i] = compilePathPolicy(ep.requestPath)
    })
  }

  /** Entry for every request of every HTTP entry point. */
  handle (ctx: Ctx, client: ClientResponse): void {
    ctx.t0 = performance.now()
    ctx.epSlot = this.#epIndex.get(ctx.entrypoint) ?? -1
    // before /health too: a request whose framing is ambiguous is refused whatever it asks for
    const fault = checkRequest(ctx, this.conf.limits.maxHeaderBytes)
    // the one place the path is decided: everything after (routing, middlewares, log, upstream) sees this one
    const policy = this.#pathPolicies[ctx.epSlot] ?? DEFAULT_POLICY
    ctx.pathPolicy = policy // path-rewrite.ts: a middleware's new path is held to the same rules
    const path = normalizePath(ctx.path, policy)
    if (typeof path === 'string') ctx.path = path
    const health = this.#health[ctx.epSlot]
    if (fault === null && health !== undefined && health !== '' && path === health && (ctx.method === 'GET' || ctx.method === 'HEAD')) {
      // the entry point's own health path, before routing; not counted or logged (nginx "access_log off"),
      // but its bytes crossed the socket: its body joins its head in bout and TotalBytesOut
      recordSent(this.stripe.f64, this.stripe.base, ctx.epSlot, client.bodyBytes(HEALTH_BODY))
      client.send(200, TEXT, HEALTH_BODY)
      return
    }
    this.stripe.add(G_REQUESTS)
    this.stripe.add(G_WRITING, 1)
    if (this.#tracer !== null) this.#tracer.start(ctx)
    if (fault !== null) {
      // the connection is closed after the answer: what follows on it cannot be framed safely
      this.error(ctx, client, fault.code, fault.params, true)
      return
    }
    if (ctx.contentLength > this.conf.limits.maxBodyBytes) {
      this.error(ctx, client, 'LB_ERR_BODY_TOO_LARGE', { limit: this.conf.limits.maxBodyBytes })
      return
    }
    if (typeof path !== 'string') {
      // `OPTIONS *` asks about the server itself (RFC 9110 §9.3.7): lb is that server, as Traefik answers it (only
      // the node engine lets one through: uWS answers 505)
      if (ctx.method === 'OPTIONS' && ctx.path === '*') this.#answer(ctx, client, 200, OPTIONS_ANY, '')
      else this.error(ctx, client, 'LB_ERR_BAD_PATH', { reason: path.reason })
      return
    }
    const badHost = checkHost(ctx)
    if (badHost !== '') {
      this.error(ctx, client, 'LB_ERR_BAD_HOST', { reason: badHost })
      return
    }
    // an ACME http-01 challenge of an order in progress: answered before routing (redirects, middlewares)
    const challenge = ctx.method === 'GET' ? acmeAnswer(ctx.entrypoint, path) : null
    if (challenge !== null) {
      this.#answer(ctx, client, 200, TEXT, challenge)
      return
    }
    // an entry point this generation does not have (a connection accepted before a reload removed it) routes nowhere
    const routes = this.#routes[ctx.epSlot]
    const route = routes === undefined ? null : matchRoute(routes, ctx)
    if (route === null) {
      this.error(ctx, client, 'LB_ERR_NO_ROUTE', {})
      return
    }
    ctx.router = route.router.name
    ctx.routeSlot = route.target.routerSlot
    const chain = route.target.chain
    if (chain.onRequest !== null) {
      const v = runRequestHooks(chain, ctx, this.log)
      if (typeof v !== 'number') {
        client.onAbort(() => { if (ctx.status === 0) ctx.status = 499 })
        v.then((verdict) => {
          if (client.aborted) this.finish(ctx)
          else if (verdict === HANDLED) this.#reply(ctx, client)
          else this.#dispatch(ctx, client, route.target)
        }, (err: unknown) => {
          this.log.error('middleware chain failed', { error: String(err) })
          this.error(ctx, client, 'LB_ERR_PLUGIN', { middleware: ctx.router })
        })
        return
      }
      if (v === HANDLED) {
        this.#reply(ctx, client)
        return
      }
    }
    this.#dispatch(ctx, client, route.target)
  }

  #dispatch (ctx: Ctx, client: ClientResponse, target: RouteTarget): void {
    // the route's response filters (errors, buffering, contentType) wrap the client; one may hold the request back
    const c = ctx.filters === null ? null : applyFilters(ctx, client, this)
    if (c instanceof ClientFilter) return c.ready(() => this.#dispatch(ctx, c, target))
    const routed = target.service
    if (routed === null) {
      this.error(ctx, client, 'LB_ERR_NO_SERVER', { service: '(none)', why: 'the route has no service' })
      return
    }
    let svc: ServiceRuntime = routed
    let mirrors: ServiceRuntime[] | null = null
    let mirrorMax = Infinity
    if (svc.group !== null) {
      // a weighted, failover or mirroring service: the service it picks serves the request (groups nest, never in a cycle)
      const t = now()
      while (svc.group !== null) {
        const g: ServiceGroupRuntime = svc.group
        const m = g.mirrorsFor()
        if (m !== null && g.conf.kind === 'mirroring') {
          mirrors = mirrors === null ? m : [...mirrors, ...m]
          mirrorMax = Math.min(mirrorMax, g.conf.maxBodyBytes)
        }
        svc = g.pick(this.shm.i32, t)
      }
      target = leafTarget(target, svc)
    }
    ctx.service = svc.conf.name
    if (svc.conf.kind === 'status') {
      if (!svc.allow(ctx.remoteAddress)) this.error(ctx, client, 'LB_ERR_FORBIDDEN', {})
      else if (ctx.method !== 'GET' && ctx.method !== 'HEAD') this.error(ctx, client, 'LB_ERR_METHOD', {}, false, ['allow', 'GET, HEAD'])
      else {
        this.#answer(ctx, client, 200, TEXT, renderStatus(this.shm)) // rendered first: it counts itself as writing, as nginx's
      }
      return
    }
    if (client.websocket !== null) {
      // a WebSocket upgrade, routed like any request; the tunnel outlives this generation
      new WsTunnel(this, ctx, client, target).start()
      return
    }
    if (svc.conf.protocol !== 'http') {
      new H2Exchange(this, ctx, client, target).start()
      return
    }
    // a remote model's request is relayed here; the rest (and what the relay gives back, its body read) goes to the service
    if (svc.conf.kind === 'generate' && mirrors === null && this.#edge !== null &&
      this.#edge.take(ctx, client, (body) => new ProxyExchange(this, ctx, new HeldBody(client, ctx, this, body), target).start())) return
    const ex = new ProxyExchange(this, ctx, client, target)
    // copies for a mirroring service's mirrors: HTTP/1.1 requests to HTTP/1.1 servers (not WebSocket, not gRPC)
    if (mirrors !== null) ex.mirror(new Mirrors(this, mirrors, (m) => httpRequestHead(ctx, m.hostFallback), mirrorMax, ctx.chunked))
    ex.start()
  }

  #reply (ctx: Ctx, client: ClientResponse): void {
    const r = ctx.reply!
    this.#answer(ctx, ctx.filters === null ? client : applyFilters(ctx, client, this), r.status, r.headers, r.body)
  }

  /** FilterHost.fetchPage: the errors middleware's page, from a service of this generation */
  fetchPage (ctx: Ctx, service: string, path: string, query: string, done: (page: Page) => void): () => void {
    return fetchPage(this, this.services.get(service), ctx, path, query, done)
  }

  /**
   * An error answer (core/errors.ts), counted before it is written (see #answer).
   * The connection stays open unless `close`: uWS reads and discards the rest of
   * an unread request body itself, and closing while the client is still sending
   * would reset the connection before it reads the answer.
   */
  error (ctx: Ctx, client: ClientResponse, code: ErrorCode, params: Record<string, string | number>, close = false,
    extra: readonly string[] = []): void {
    ctx.errorCode = code
    if (ctx.filters !== null) client = applyFilters(ctx, client, this)
    this.#answer(ctx, client, ERRORS[code].status, extra.length === 0 ? TEXT : [...TEXT, ...extra], formatError(code, params) + '\n', close)
  }

  /**
   * A complete local answer, the one place its shape is decided: a gRPC client
   * gets an error as a gRPC status (grpc-status.ts). Counted (finish) before it is written: a client
   * that has its answer finds it in every counter, metric and log line.
   */
  #answer (ctx: Ctx, client: ClientResponse, status: number, headers: readonly string[], body: string, close = false): void {
    // counted and logged as the HTTP status lb decided (a filter's rewrite of it, errors' status_rewrites), also when a gRPC client gets it as 200
    ctx.status = client instanceof ClientFilter ? client.statusFor(status) : status
    if (status >= 400 && (isGrpc(ctx) || isGrpcWeb(ctx))) {
      ctx.grpcStatus = grpcCode(status) // but the request counters count a gRPC call by the grpc-status it got
      // a gRPC-Web client gets its own content-type and, from the route's grpcWeb middleware, its CORS headers
      headers = isGrpc(ctx) ? grpcHeaders(status, body, headers) : grpcHeaders(status, body, ctx.responseHeaders === null ? headers : [...headers, ...ctx.responseHeaders], ctx.header('content-type').split(';')[0]!)
      status = 200
      body = ''
    } else if (status >= 400 && this.#genRouters.size > 0) {
      const shape = this.#apiShape(ctx)
      if (shape !== 'text') ({ headers, body } = shapeAnswer(shape, status, headers, body))
    }
    ctx.bytesOut = client.bodyBytes(body)
    this.finish(ctx)
    client.send(status, headers, body, close)
  }

  /**
   * The API shape of an error answer (core/api-errors.ts): an Ollama or OpenAI client of a generation service
   * gets its own error body, whoever refused it (a middleware's 401 or 429, the 413 of max_body, a 503).
   * Only error answers ask; one answered before routing (max_body) asks which route would have taken it.
   */
  #apiShape (ctx: Ctx): ApiShape {
    let router = ctx.router
    if (router === '') {
      const routes = this.#routes[ctx.epSlot]
      router = (routes === undefined ? null : matchRoute(routes, ctx))?.router.name ?? ''
    }
    return this.#genRouters.has(router) ? apiOfPath(ctx.path) : 'text'
  }

  /**
   * Every counted request ends here exactly once, before the client can see
   * its end (the last body byte or the end of the response).
   */
  finish (ctx: Ctx): void {
    const ends = ctx.ends
    if (ends !== null) {
      ctx.ends = null
      for (const fn of ends) {
        try { fn(ctx) } catch (err) { this.log.error('a middleware\'s end-of-request hook failed', { router: ctx.router, error: String(err) }) }
      }
    }
    const s = this.stripe
    s.add(G_WRITING, -1)
    s.add(G_BYTES_OUT, ctx.bytesOut)
    s.add(G_RESP_1XX + statusClass(ctx.status))
    const ms = performance.now() - ctx.t0
    // a gRPC call only comes over HTTP/2: an HTTP/1.1 request pays one field read here
    const grpc = ctx.h2 && isGrpc(ctx) ? (ctx.grpcStatus >= 0 ? ctx.grpcStatus : ctx.status >= 400 ? grpcCode(ctx.status) : 2) : -1
    recordRequest(s.f64, s.base, ctx.epSlot, ctx.routeSlot, ctx.method, ctx.status, grpc, ms, ctx.bytesIn, ctx.bytesOut, ctx.reply !== null)
    recordHeadIn(s.f64, s.base, ctx.epSlot, ctx.method, ctx.path, ctx.query, ctx.headers)
    if (this.accessLog.enabled) this.accessLog.write(ctx, Math.round(ms))
    if (ctx.trace !== null) this.#tracer?.end(ctx, ms)
  }
}
