// Dynamic configuration: routers, services (upstream groups and internal
// services) and middlewares. Hot-swapped on reload (SIGHUP) and by the config
// API; every worker receives the whole frozen snapshot with a generation number.
import { expandChains } from './middleware-chain.js'
import { type Checker, type Table, join } from './check.js'
import { DEFAULTS } from './defaults.js'
import { type Rule, parseRule, rulePriority } from './rules/rule.js'
import { parseHostPort } from './host-port.js'
import { checkCidrs } from '../net/source.js'
import { type RouterTlsConf, checkRouterTls } from './router-tls.js'
import { DEFAULT_UPSTREAM_TLS, type UpstreamTlsConf, checkUpstreamTls } from './upstream-tls.js'
import { type StickyCookieConf, checkSticky } from './sticky.js'
import { GROUP_KEYS, type ServiceGroup, checkGroup, checkGroupRefs, groupKeys } from './service-group.js'

export const BALANCES = ['roundrobin', 'leastconn', 'source'] as const
export type Balance = typeof BALANCES[number]

/**
 * proxy: an upstream group. status: the stub_status page. generate: the generation endpoint (core/gen).
 * weighted, failover, mirroring: services of services (service-group.ts).
 */
export const SERVICE_KINDS = ['proxy', 'status', 'generate', 'weighted', 'failover', 'mirroring'] as const
export type ServiceKind = typeof SERVICE_KINDS[number]

export interface ServerConf {
  readonly name: string
  /** "host:port" as written, or "unix:/path" */
  readonly address: string
  readonly host: string
  readonly port: number
  /** unix socket path, or '' for TCP */
  readonly path: string
  readonly weight: number
  readonly maxFails: number
  readonly failTimeoutMs: number
  readonly check: boolean
  /** administratively in maintenance (HAProxy `disabled`): takes no traffic until enabled */
  readonly maintenance: boolean
}

/**
 * http: GET `path`, expect `status`; tcp: a connect within `timeout` passes (HAProxy's plain `check`);
 * grpc: grpc.health.v1.Health/Check over HTTP/2 must answer SERVING (nginx Plus `health_check type=grpc`)
 */
export const CHECK_TYPES = ['http', 'tcp', 'grpc'] as const
export interface HealthCheckConf {
  readonly type: typeof CHECK_TYPES[number]
  readonly path: string
  /** type grpc: the `service` field of the check request; '' asks about the server as a whole (nginx `grpc_service`) */
  readonly grpcService: string
  readonly intervalMs: number
  readonly timeoutMs: number
  readonly rise: number
  readonly fall: number
  readonly status: number
}

export const UPSTREAM_PROTOCOLS = ['http', 'h2c', 'h2'] as const
export type UpstreamProtocol = typeof UPSTREAM_PROTOCOLS[number]

export interface ServiceConf {
  readonly name: string
  readonly kind: ServiceKind
  readonly balance: Balance
  readonly keepalive: number
  /** how requests go to the servers: HTTP/1.1, or HTTP/2 with prior knowledge (h2c) or over TLS (h2) (gRPC; core/upstream/h2-pool.ts) */
  readonly protocol: UpstreamProtocol
  /** protocol h2: the TLS to the servers ([services.X.tls], or DEFAULT_UPSTREAM_TLS); null for the other protocols */
  readonly tls: UpstreamTlsConf | null
  /** tries on other servers after the first fails before any response byte (nginx proxy_next_upstream_tries - 1) */
  readonly retries: number
  /** no new try starts this long (ms) after the first one began; 0 = no limit (nginx proxy_next_upstream_timeout) */
  readonly retryTimeoutMs: number
  readonly healthCheck: HealthCheckConf
  /** kind weighted or failover: the services it hands requests to; null for the other kinds */
  readonly group: ServiceGroup | null
  /** session affinity by cookie ([services.X.sticky.cookie]); null = none */
  readonly sticky: StickyCookieConf | null
  readonly servers: readonly ServerConf[]
  /** status service: sources allowed to read it (CIDR or addresses) */
  readonly allow: readonly string[]
}

export interface RouterConf {
  readonly name: string
  readonly rule: string
  /** the rule compiled (rule.ts): plain data the workers turn into matchers */
  readonly ast: Rule
  /** as configured; 0 = derive it from the rule (Traefik) */
  readonly priority: number
  /** the priority routing uses: `priority`, or when 0 the rule's length (rule.ts rulePriority) */
  readonly effectivePriority: number
  readonly entrypoints: readonly string[]
  /** as configured (the dashboard shows these) */
  readonly middlewares: readonly string[]
  /** what the router runs, in order: `middlewares` with each chain expanded (middleware-chain.ts) */
  readonly chain: readonly string[]
  readonly service: string
  /** certificates from an ACME resolver for the rule's hosts; null = none */
  readonly tls: RouterTlsConf | null
}

export interface MiddlewareConf {
  readonly name: string
  readonly type: string
  /** the plugin's own validated, frozen config */
  readonly conf: unknown
}

/** Validates one middleware's plugin config; supplied by plugins/index.ts. */
export type MiddlewareChecker = (c: Checker, type: string, t: Table, path: string, baseDir: string, pluginsDir: string) => unknown

const NAME = /^[A-Za-z0-9_.:-]+$/

export function checkServer (c: Checker, t: Table, p: string, index: number): ServerConf {
  const d = DEFAULTS.server
  const address = c.string(t, 'address', p)
  let host = ''
  let port = 0
  let path = ''
  if (address.startsWith('unix:')) {
    path = address.slice(5)
    if (!path.startsWith('/')) c.problem(join(p, 'address'), 'an absolute unix socket path after "unix:"', address)
  } else if (address !== '') {
    const hp = parseHostPort(address)
    if (hp === null) c.problem(join(p, 'address'), 'an address like "127.0.0.1:9001" or "unix:/path"', address)
    else ({ host, port } = hp)
  }
  const name = c.string(t, 'name', p, `s${index + 1}`)
  if (!NAME.test(name)) c.problem(join(p, 'name'), 'a name of letters, digits, "_", "-", ".", ":"', name)
  return {
    name,
    address,
    host,
    port,
    path,
    weight: c.int(t, 'weight', p, d.weight, 0, 256),
    maxFails: c.int(t, 'max_fails', p, d.maxFails, 0, 1_000_000),
    failTimeoutMs: c.duration(t, 'fail_timeout', p, d.failTimeoutMs, 1),
    check: c.bool(t, 'check', p, d.check),
    maintenance: c.bool(t, 'maintenance', p, d.maintenance),
  }
}

const SERVER_KEYS = ['name', 'address', 'weight', 'max_fails', 'fail_timeout', 'check', 'maintenance']

function checkService (c: Checker, name: string, raw: unknown, baseDir: string): ServiceConf {
  const p = join('services', name)
  const t = c.table(raw, p, ['kind', 'balance', 'keepalive', 'protocol', 'tls', 'retries', 'retry_timeout', 'health_check', 'sticky', 'servers', 'allow', ...GROUP_KEYS])
  const kind = c.oneOf(t, 'kind', p, SERVICE_KINDS, 'proxy')
  const hp = join(p, 'health_check')
  const h = c.table(t.health_check, hp, ['type', 'path', 'grpc_service', 'interval', 'timeout', 'rise', 'fall', 'status'])
  const dh = DEFAULTS.healthCheck
  const healthCheck: HealthCheckConf = {
    type: c.oneOf(h, 'type', hp, CHECK_TYPES, dh.type),
    path: c.string(h, 'path', hp, dh.path),
    grpcService: c.string(h, 'grpc_service', hp, dh.grpcService),
    intervalMs: c.duration(h, 'interval', hp, dh.intervalMs, 10),
    timeoutMs: c.duration(h, 'timeout', hp, dh.timeoutMs, 1),
    rise: c.int(h, 'rise', hp, dh.rise, 1, 100),
    fall: c.int(h, 'fall', hp, dh.fall, 1, 100),
    status: c.int(h, 'status', hp, dh.status, 100, 599),
  }
  if (!healthCheck.path.startsWith('/')) c.problem(join(hp, 'path'), 'a path starting with "/"', healthCheck.path)
  if (h.grpc_service !== undefined && healthCheck.type !== 'grpc') c.problems.push(`${join(hp, 'grpc_service')}: only for type = "grpc"`)
  const servers = c.tables(t.servers, join(p, 'servers')).map((s, i) => {
    const sp = join(join(p, 'servers'), i)
    c.table(s, sp, SERVER_KEYS)
    return checkServer(c, s, sp, i)
  })
  const names = new Set<string>()
  for (const s of servers) {
    if (names.has(s.name)) c.problems.push(`${join(p, 'servers')}: server name ${JSON.stringify(s.name)} is used twice`)
    names.add(s.name)
  }
  if (kind !== 'proxy' && t.servers !== undefined) c.problems.push(`${join(p, 'servers')}: a ${kind} service has no servers`)
  const protocol = c.oneOf(t, 'protocol', p, UPSTREAM_PROTOCOLS, 'http')
  const tls = checkUpstreamTls(c, t.tls, join(p, 'tls'), baseDir)
  if (tls !== null && protocol !== 'h2') c.problems.push(`${join(p, 'tls')}: only for protocol = "h2" (TLS to the servers)`)
  const group = kind === 'weighted' || kind === 'failover' || kind === 'mirroring' ? checkGroup(c, t, p, kind) : null
  for (const k of GROUP_KEYS) {
    if (t[k] !== undefined && !(groupKeys[kind] ?? []).includes(k)) c.problems.push(`${join(p, k)}: not a key of a ${kind} service`)
  }
  const sticky = checkSticky(c, t.sticky, join(p, 'sticky'), name)
  if (sticky !== null && kind !== 'proxy') c.problems.push(`${join(p, 'sticky')}: only for a service with servers`)
  return {
    name,
    kind,
    balance: c.oneOf(t, 'balance', p, BALANCES, DEFAULTS.service.balance),
    keepalive: c.int(t, 'keepalive', p, DEFAULTS.service.keepalive, 0, 65_536),
    protocol,
    tls: protocol === 'h2' ? tls ?? DEFAULT_UPSTREAM_TLS : null,
    retries: c.int(t, 'retries', p, DEFAULTS.service.retries, 0, 10),
    retryTimeoutMs: c.duration(t, 'retry_timeout', p, DEFAULTS.service.retryTimeoutMs),
    healthCheck,
    group,
    sticky,
    servers,
    allow: checkCidrs(c, t, 'allow', p, DEFAULTS.status.allow),
  }
}

export function checkServices (c: Checker, raw: unknown, baseDir: string): ServiceConf[] {
  const t = c.table(raw, 'services', null)
  const out: ServiceConf[] = []
  for (const [name, v] of Object.entries(t)) {
    if (!NAME.test(name)) c.problem(join('services', name), 'a name of letters, digits, "_", "-", ".", ":"', name)
    out.push(checkService(c, name, v, baseDir))
  }
  checkGroupRefs(c, out)
  return out
}

export function checkMiddlewares (c: Checker, raw: unknown, baseDir: string, pluginsDir: string, checkPlugin: MiddlewareChecker): MiddlewareConf[] {
  const t = c.table(raw, 'middlewares', null)
  const out: MiddlewareConf[] = []
  for (const [name, v] of Object.entries(t)) {
    const p = join('middlewares', name)
    const m = c.table(v, p, null)
    const type = c.string(m, 'type', p)
    const rest: Table = { ...m }
    delete rest.type
    out.push({ name, type, conf: type === '' ? null : checkPlugin(c, type, rest, p, baseDir, pluginsDir) })
  }
  return out
}

/** The services middlewares name (the errors middleware's page service): they must exist and proxy HTTP. */
export function checkMiddlewareServices (c: Checker, middlewares: readonly MiddlewareConf[], services: readonly ServiceConf[]): void {
  for (const m of middlewares) {
    if (m.type !== 'errors' || m.conf === null) continue
    const name = (m.conf as { service: string }).service
    const s = services.find((x) => x.name === name)
    const p = join(join('middlewares', m.name), 'service')
    if (s === undefined) c.problems.push(`${p}: unknown service ${JSON.stringify(name)}`)
    else if (s.kind === 'status' || s.kind === 'generate') c.problems.push(`${p}: the service ${JSON.stringify(name)} is a ${s.kind} service; error pages come from a service with servers (or a weighted or failover one)`)
  }
}

const MAX_PRIORITY = Number.MAX_SAFE_INTEGER

export function checkRouters (c: Checker, raw: unknown, entrypoints: readonly string[], services: readonly ServiceConf[],
  middlewares: readonly MiddlewareConf[]): RouterConf[] {
  const t = c.table(raw, 'routers', null)
  const out: RouterConf[] = []
  const expanded = expandChains(c, middlewares)
  for (const [name, v] of Object.entries(t)) {
    const p = join('routers', name)
    const r = c.table(v, p, ['rule', 'priority', 'entrypoints', 'middlewares', 'service', 'tls'])
    const rule = c.string(r, 'rule', p)
    let ast: Rule = { op: 'pathPrefix', values: ['/'] }
    if (rule !== '') {
      try {
        ast = parseRule(rule)
      } catch (err) {
        c.problems.push(`${join(p, 'rule')}: ${(err as Error).message}`)
      }
    }
    const eps = c.strings(r, 'entrypoints', p, entrypoints)
    for (const e of eps) if (!entrypoints.includes(e)) c.problems.push(`${join(p, 'entrypoints')}: unknown entry point ${JSON.stringify(e)} (defined: ${entrypoints.join(', ')})`)
    const mws = c.strings(r, 'middlewares', p, [])
    for (const m of mws) if (!middlewares.some((x) => x.name === m)) c.problems.push(`${join(p, 'middlewares')}: unknown middleware ${JSON.stringify(m)}`)
    const service = c.string(r, 'service', p)
    if (service !== '' && !services.some((s) => s.name === service)) c.problems.push(`${join(p, 'service')}: unknown service ${JSON.stringify(service)}`)
    // Traefik takes any int up to MaxInt64 - 1000, negative ones too; lb's numbers are exact to 2^53
    const priority = c.int(r, 'priority', p, DEFAULTS.router.priority, -MAX_PRIORITY, MAX_PRIORITY)
    const effectivePriority = priority !== 0 ? priority : rulePriority(rule, ast)
    const chain = mws.flatMap((m) => expanded.get(m) ?? [])
    out.push({ name, rule, ast, priority, effectivePriority, entrypoints: eps, middlewares: mws, chain, service, tls: checkRouterTls(c, r.tls, join(p, 'tls')) })
  }
  return out
}

/** The `type` of every middleware in raw (parsed, not yet validated) TOML: the plugin modules to import first. */
export function middlewareTypes (raw: unknown): string[] {
  const mws = (raw as { middlewares?: unknown } | null)?.middlewares
  if (typeof mws !== 'object' || mws === null) return []
  const out: string[] = []
  for (const m of Object.values(mws)) {
    const type = (m as { type?: unknown } | null)?.type
    if (typeof type === 'string') out.push(type)
  }
  return out
}
