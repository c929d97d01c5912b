// Prometheus /metrics. Every family is pulled at scrape time: collect() sums
// the per-worker stripes in shared memory (no message per request, one scrape
// covers all workers) and reads the server words; nothing is counted here.
// Names follow Traefik's with an `lb_` prefix, plus HAProxy-like server
// families. Codes not in REQ_CODES appear as their class ("2xx"); methods not
// in REQ_METHODS as "OTHER". The request counters' `protocol` label is
// Traefik's: "websocket" (a 101), "grpc" (code = the grpc-status, method POST),
// else "http"; the histograms and byte counters say "http" for all.
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import {
  ADMIN_STATES, C_BYTES_IN, C_BYTES_OUT, C_CONN_ERR, C_RESP_1XX, C_RESP_ERR, C_RETRIES, C_SELECTED, G_ACCEPTS, G_AUTH_REFUSED,
  G_RATE_LIMITED, G_REFUSED, G_REQUESTS, G_SSL_BACKEND_KEYS, G_TRACE_DROPPED, G_TRACE_EXPORTED, G_WRITING, H_CONN_ACTIVE, H_FAULTS, H_LAST_RELOAD_OK, H_LAST_RELOAD_SEC, H_RELOADS,
  H_RELOAD_FAILS, REQ_CODES, REQ_GRPC_BASE, REQ_GRPC_CODES, REQ_METHODS, T_BYTES_IN, T_BYTES_OUT,
} from '../shm/layout.js'
import { sumGlobal, sumServer } from '../shm/counters.js'
import { Revocations, unixNow } from '../shm/revocations.js'
import { epRow, routerRow, sumRequestRow, sumTimeBlock } from '../shm/request-stats.js'
import type { GenStats } from '../gen/stats.js'
import type { ClusterStatus } from '../cluster/status.js'
import type { AdminCore } from './context.js'
import { genFamilies, type Pull } from './gen-metrics.js'
import { ShmHistogram } from './shm-histogram.js'
import { serverUrl, serverView } from './server-view.js'

type Labels = Record<string, string>

export interface Metrics {
  readonly registry: Registry
  /** Adds the generation service's families (core/gen/service.ts stats()); called by whoever starts that service. */
  attachGen (stats: () => GenStats): void
}

export function createMetrics (ctx: AdminCore): Metrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  // prom-client names these gauges *_total, which `promtool check metrics` rejects; they add little to the handles/requests gauges
  for (const n of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) registry.removeSingleMetric(n)
  const shm = ctx.shm

  /** a family whose samples are recomputed at each scrape */
  const pull: Pull = (kind, name, help, labelNames, read) => {
    const Ctor = kind === 'counter' ? Counter : Gauge
    // eslint-disable-next-line no-new -- prom-client registers a metric when it is made
    new Ctor({
      name,
      help,
      labelNames,
      registers: [registry],
      collect (this: Counter | Gauge) {
        this.reset()
        for (const [labels, v] of read()) {
          if (this instanceof Counter) this.inc(labels, Math.max(0, v))
          else (this as Gauge).set(labels, v)
        }
      },
    })
  }
  const one = (v: number): Array<[Labels, number]> => [[{}, v]]

  const routerKey = (name: string): string => `${name}@file`
  const serviceKey = (name: string): string => `${name}@${ctx.store.apiOwned(name) ? 'api' : 'file'}`

  /** request rows as [labels, count] for every non-zero (method, code) cell */
  const cells = (row: number, base: Labels): Array<[Labels, number]> => {
    const out: Array<[Labels, number]> = []
    const r = sumRequestRow(shm, row)
    for (let m = 0; m < REQ_METHODS.length; m++) {
      for (let c = 0; c < REQ_CODES.length; c++) {
        const v = r[m * REQ_CODES.length + c]!
        // a 101 is a WebSocket handshake (the only upgrade proxied); Traefik labels those "websocket"
        if (v > 0) out.push([{ ...base, method: REQ_METHODS[m]!, code: REQ_CODES[c]!, protocol: REQ_CODES[c] === '101' ? 'websocket' : 'http' }, v])
      }
    }
    for (let g = 0; g < REQ_GRPC_CODES; g++) {
      const v = r[REQ_GRPC_BASE + g]!
      if (v > 0) out.push([{ ...base, method: 'POST', code: String(g), protocol: 'grpc' }, v])
    }
    return out
  }

  // --- entry points
  const eps = (): Array<{ labels: Labels, row: number }> => ctx.config().entrypoints.map((e, i) => ({ labels: { entrypoint: e.name }, row: epRow(i) }))
  pull('counter', 'lb_entrypoint_requests_total', 'Requests received by an entry point, by method and status code.', ['code', 'method', 'protocol', 'entrypoint'],
    () => eps().flatMap((e) => cells(e.row, e.labels)))
  // eslint-disable-next-line no-new -- registers itself
  new ShmHistogram(registry, 'lb_entrypoint_request_duration_seconds', 'Time from request arrival to the end of the response, per entry point.',
    () => eps().map((e) => ({ labels: { ...e.labels, protocol: 'http' }, block: sumTimeBlock(shm, e.row) })))
  pull('counter', 'lb_entrypoint_requests_bytes_total', 'Request body bytes received by an entry point.', ['entrypoint', 'protocol'],
    () => eps().map((e) => [{ ...e.labels, protocol: 'http' }, sumTimeBlock(shm, e.row)[T_BYTES_IN]!]))
  pull('counter', 'lb_entrypoint_responses_bytes_total', 'Response body bytes sent by an entry point.', ['entrypoint', 'protocol'],
    () => eps().map((e) => [{ ...e.labels, protocol: 'http' }, sumTimeBlock(shm, e.row)[T_BYTES_OUT]!]))
  pull('gauge', 'lb_open_connections', 'Client connections open now, all entry points.', ['protocol'],
    () => [[{ protocol: 'http' }, Atomics.load(shm.i32, H_CONN_ACTIVE)]])

  // --- routers and services
  const routers = (): Array<{ labels: Labels, row: number, service: string }> => ctx.config().routers.flatMap((r) => {
    const slot = ctx.slots.router(r.name)
    return slot === undefined ? [] : [{ labels: { router: routerKey(r.name), service: serviceKey(r.service) }, row: routerRow(slot), service: r.service }]
  })
  pull('counter', 'lb_router_requests_total', 'Requests matched by a router, by method and status code.', ['code', 'method', 'protocol', 'router', 'service'],
    () => routers().flatMap((r) => cells(r.row, r.labels)))
  // eslint-disable-next-line no-new -- registers itself
  new ShmHistogram(registry, 'lb_router_request_duration_seconds', 'Time from request arrival to the end of the response, per router.',
    () => routers().map((r) => ({ labels: { ...r.labels, protocol: 'http' }, block: sumTimeBlock(shm, r.row) })))
  pull('counter', 'lb_router_requests_bytes_total', 'Request body bytes received through a router.', ['router', 'service', 'protocol'],
    () => routers().map((r) => [{ ...r.labels, protocol: 'http' }, sumTimeBlock(shm, r.row)[T_BYTES_IN]!]))
  pull('counter', 'lb_router_responses_bytes_total', 'Response body bytes sent through a router.', ['router', 'service', 'protocol'],
    () => routers().map((r) => [{ ...r.labels, protocol: 'http' }, sumTimeBlock(shm, r.row)[T_BYTES_OUT]!]))
  pull('counter', 'lb_service_requests_total', 'Requests routed to a service, by method and status code (sum of its routers).', ['code', 'method', 'protocol', 'service'], () => {
    const sums = new Map<string, [Labels, number]>()
    for (const r of routers()) {
      for (const [l, v] of cells(r.row, { service: r.labels.service! })) {
        const k = JSON.stringify(l)
        const cur = sums.get(k)
        if (cur === undefined) sums.set(k, [l, v])
        else cur[1] += v
      }
    }
    return [...sums.values()]
  })

  // --- servers
  const servers = (): Array<{ svc: ReturnType<AdminCore['config']>['services'][number], srv: ReturnType<AdminCore['config']>['services'][number]['servers'][number], labels: Labels, slot: number }> =>
    ctx.config().services.filter((s) => s.kind === 'proxy').flatMap((svc) => svc.servers.flatMap((srv) => {
      const slot = ctx.slots.server(svc.name, srv.name)
      return slot === undefined ? [] : [{ svc, srv, slot, labels: { service: serviceKey(svc.name), server: srv.name } }]
    }))
  const perServer = (id: number) => () => servers().map((s): [Labels, number] => [s.labels, sumServer(shm, s.slot, id)])
  pull('gauge', 'lb_service_server_up', 'Server state as the balancer sees it: 1 = UP (healthy, not in maintenance), 0 = DOWN.', ['service', 'server', 'url'],
    () => servers().map((s) => [{ ...s.labels, url: serverUrl(s.srv) }, serverView(ctx, s.svc, s.srv).traefik === 'UP' ? 1 : 0]))
  pull('gauge', 'lb_server_admin_state', 'Administrative state of a server (1 on the current one): ready, drain or maint.', ['service', 'server', 'state'],
    () => servers().flatMap((s) => {
      const a = serverView(ctx, s.svc, s.srv).admin
      return ADMIN_STATES.map((st): [Labels, number] => [{ ...s.labels, state: st }, st === a ? 1 : 0])
    }))
  pull('gauge', 'lb_server_weight', 'Effective weight of a server (0-256).', ['service', 'server'],
    () => servers().map((s) => [s.labels, serverView(ctx, s.svc, s.srv).weight]))
  pull('gauge', 'lb_server_inflight_requests', 'Requests in flight to a server, all workers.', ['service', 'server'],
    () => servers().map((s) => [s.labels, serverView(ctx, s.svc, s.srv).inflight]))
  pull('counter', 'lb_server_selected_total', 'Times the balancer picked a server.', ['service', 'server'], perServer(C_SELECTED))
  pull('counter', 'lb_server_requests_bytes_total', 'Bytes sent to a server.', ['service', 'server'], perServer(C_BYTES_IN))
  pull('counter', 'lb_server_responses_bytes_total', 'Bytes received from a server.', ['service', 'server'], perServer(C_BYTES_OUT))
  pull('counter', 'lb_server_responses_total', 'Responses from a server by status class.', ['service', 'server', 'code'],
    () => servers().flatMap((s) => [0, 1, 2, 3, 4].map((i): [Labels, number] => [{ ...s.labels, code: `${i + 1}xx` }, sumServer(shm, s.slot, C_RESP_1XX + i)])))
  pull('counter', 'lb_server_connect_errors_total', 'Failed connection attempts to a server.', ['service', 'server'], perServer(C_CONN_ERR))
  pull('counter', 'lb_server_response_errors_total', 'Resets, time-outs and invalid responses from a server.', ['service', 'server'], perServer(C_RESP_ERR))
  pull('counter', 'lb_service_retries_total', 'Requests retried on another server of a service.', ['service'], () => {
    const by = new Map<string, number>()
    for (const s of servers()) by.set(s.labels.service!, (by.get(s.labels.service!) ?? 0) + sumServer(shm, s.slot, C_RETRIES))
    return [...by].map(([service, v]): [Labels, number] => [{ service }, v])
  })
  const checked = (): ReturnType<typeof servers> => servers().filter((s) => s.srv.check)
  pull('gauge', 'lb_server_check_up', 'Whether a health-checked server is healthy: 1 = up, 0 = down (active check, rise/fall applied, or passively marked down).', ['service', 'server'],
    () => checked().map((s) => [s.labels, serverView(ctx, s.svc, s.srv).healthy ? 1 : 0]))
  pull('gauge', 'lb_server_check_success', 'Whether the last health check passed (1) or failed (0).', ['service', 'server'],
    () => checked().map((s) => [s.labels, ['L7OK', 'L4OK'].includes(serverView(ctx, s.svc, s.srv).checkStatus) ? 1 : 0]))
  pull('gauge', 'lb_server_check_duration_seconds', 'Duration of the last health check.', ['service', 'server'],
    () => checked().map((s) => [s.labels, serverView(ctx, s.svc, s.srv).checkMs / 1000]))
  pull('counter', 'lb_server_check_failures_total', 'Failed health checks while the server was up (HAProxy chkfail).', ['service', 'server'],
    () => checked().map((s) => [s.labels, serverView(ctx, s.svc, s.srv).checkFails]))
  pull('counter', 'lb_server_check_down_total', 'UP to DOWN transitions caused by health checks (HAProxy chkdown).', ['service', 'server'],
    () => checked().map((s) => [s.labels, serverView(ctx, s.svc, s.srv).downCount]))

  // --- whole process
  pull('counter', 'lb_requests_total', 'Client requests, all entry points (the status page "requests").', [], () => one(sumGlobal(shm, G_REQUESTS)))
  pull('gauge', 'lb_requests_in_progress', 'Requests being processed now.', [], () => one(sumGlobal(shm, G_WRITING)))
  pull('counter', 'lb_connections_accepted_total', 'Client connections accepted, those closed at once over global.max_connections included.', [], () => one(sumGlobal(shm, G_ACCEPTS)))
  pull('counter', 'lb_overload_refusals_total', 'Client connections closed at once because global.max_connections were open.', [], () => one(sumGlobal(shm, G_REFUSED)))
  // HAProxy's exporter has the rate (haproxy_process_current_backend_ssl_key_rate); a counter gives it with rate()
  pull('counter', 'lb_upstream_tls_handshakes_total', 'Full TLS handshakes (not resumed) completed with servers, health checks and model servers included (show info SslBackendKeyRate is its rate).', [],
    () => one(sumGlobal(shm, G_SSL_BACKEND_KEYS)))
  pull('counter', 'lb_ratelimit_refusals_total', 'Requests refused with 429 by a rate-limit middleware.', [], () => one(sumGlobal(shm, G_RATE_LIMITED)))
  pull('counter', 'lb_auth_refusals_total', 'Requests refused with 401 or 403 by an authentication middleware.', [], () => one(sumGlobal(shm, G_AUTH_REFUSED)))
  pull('counter', 'lb_tracing_spans_dropped_total', 'Trace spans dropped before a collector accepted them: a worker\'s queue was full (collector away or slow), the collector refused them, or lb stopped first.', [],
    () => one(sumGlobal(shm, G_TRACE_DROPPED)))
  pull('counter', 'lb_tracing_spans_exported_total', 'Trace spans the OTLP collector accepted.', [], () => one(sumGlobal(shm, G_TRACE_EXPORTED)))
  pull('counter', 'lb_control_plane_errors_total', 'Exceptions in the control plane (management handlers, health checks, reloads...) logged and carried on from.', [],
    () => one(Atomics.load(shm.i32, H_FAULTS)))
  pull('counter', 'lb_config_reloads_total', 'Configuration reloads applied (SIGHUP).', [], () => one(Atomics.load(shm.i32, H_RELOADS)))
  pull('counter', 'lb_config_reload_failures_total', 'Configuration reloads rejected (invalid file; the running configuration stayed).', [], () => one(Atomics.load(shm.i32, H_RELOAD_FAILS)))
  pull('gauge', 'lb_config_last_reload_success', 'Whether the last reload succeeded (1) or was rejected (0).', [], () => one(Atomics.load(shm.i32, H_LAST_RELOAD_OK)))
  pull('gauge', 'lb_config_last_reload_timestamp_seconds', 'Unix time of the last reload attempt (0 = none).', [], () => one(Atomics.load(shm.i32, H_LAST_RELOAD_SEC)))
  pull('gauge', 'lb_config_version', 'Configuration version of the config API (+1 per write).', [], () => one(ctx.store.version))
  pull('gauge', 'lb_config_generation', 'Dynamic configuration generation applied in the workers (+1 per reload or API write).', [], () => one(ctx.generation()))
  pull('counter', 'lb_acme_orders_total', 'ACME orders (new certificates and renewals) by resolver and outcome (success, failure).', ['resolver', 'outcome'],
    () => [...(ctx.certificates?.counts() ?? [])].flatMap(([resolver, n]): Array<[Labels, number]> => [[{ resolver, outcome: 'success' }, n.success], [{ resolver, outcome: 'failure' }, n.failure]]))
  pull('gauge', 'lb_acme_certificate_expiry_timestamp_seconds', 'Unix time at which each ACME certificate expires, by resolver and subject name (absent until one is obtained).', ['resolver', 'domain'],
    () => (ctx.certificates?.status() ?? []).filter((c) => c.notAfter !== '').map((c): [Labels, number] => [{ resolver: c.resolver, domain: c.domains[0]! }, Date.parse(c.notAfter) / 1000]))
  pull('gauge', 'lb_acme_certificate_failures', 'Failed ACME orders in a row for each certificate (0 once one succeeds), by resolver and subject name.', ['resolver', 'domain'],
    () => (ctx.certificates?.status() ?? []).map((c): [Labels, number] => [{ resolver: c.resolver, domain: c.domains[0]! }, c.failures]))
  pull('gauge', 'lb_workers', 'Data-plane worker threads.', [], () => one(shm.workers))
  const revocations = new Revocations(shm.i32)
  pull('gauge', 'lb_session_revocations', 'Revoked sessions (oidc logouts) this node refuses now, of limits.session_revocations.', [], () => one(revocations.live(unixNow())))
  pull('counter', 'lb_session_revocation_resets_total', 'Times the session revocation table was full: every session born until then was refused.', [], () => one(revocations.resets()))

  // --- cluster ([cluster] only: no samples without it)
  const cl = (f: (s: ClusterStatus) => number) => (): Array<[Labels, number]> => { const s = ctx.cluster(); return s === null ? [] : one(f(s)) }
  pull('gauge', 'lb_cluster_nodes', 'Live nodes of the cluster (this one included) at the last heartbeat.', [], cl((s) => s.nodes.length))
  pull('gauge', 'lb_cluster_redis_up', 'Whether this node reached Redis at its last command (1) or not (0: rate limits on the local share).', [], cl((s) => s.redisUp ? 1 : 0))
  pull('gauge', 'lb_cluster_sync_seconds', 'Duration of the last rate-limit sync with Redis.', [], cl((s) => s.syncSeconds))
  pull('gauge', 'lb_cluster_last_sync_timestamp_seconds', 'Unix time of the last successful rate-limit sync (0 = none).', [], cl((s) => s.lastSync / 1000))
  pull('counter', 'lb_cluster_redis_slow_replies_total', 'Redis commands not answered within max_wait, each one (one alone does not make Redis down: see fall).', [], cl((s) => s.redisSlowReplies))
  pull('counter', 'lb_cluster_redis_errors_total', 'Redis commands that failed otherwise: refused or closed connection, error reply.', [], cl((s) => s.redisErrors))
  pull('counter', 'lb_cluster_redis_transitions_total', 'Times Redis was judged down after being reachable (to="down"), and reachable again (to="up").', ['to'],
    () => { const s = ctx.cluster(); return s === null ? [] : [[{ to: 'down' }, s.redisDowns], [{ to: 'up' }, s.redisUps]] })
  pull('counter', 'lb_cluster_ratelimit_unavailable_total', 'Requests answered 503 by a failure_mode = "closed" cluster-scope rate limit while Redis was down.', [], cl((s) => s.refusedUnavailable))
  pull('counter', 'lb_cluster_ratelimit_refusals_total', 'Requests refused by a cluster-scope rate limit, by how: with the cluster\'s counts or on the local share (Redis down).', ['decided'],
    () => { const s = ctx.cluster(); return s === null ? [] : [[{ decided: 'cluster' }, s.refusedCluster], [{ decided: 'local' }, s.refusedLocal]] })

  let genAttached = false
  const attachGen = (stats: () => GenStats): void => {
    if (genAttached) return
    genAttached = true
    genFamilies(registry, pull, stats)
  }
  return { registry, attachGen }
}
