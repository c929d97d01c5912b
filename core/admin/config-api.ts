// The configuration API: HAProxy Data Plane API v2 paths with `lb` in place of
// `haproxy`. Backends are the config's services of kind "proxy". GET bodies are
// {"_version": N, "data": ...}; writes answer the stored object; every answer
// carries Configuration-Version. Errors are {code, message}: 404 missing
// object, 409 exists / version mismatch, 400 unparsable body or validation
// error, 422 schema violation (go-openapi codes 6xx), 415 not JSON.
import type { Table } from '../config/check.js'
import type { ServiceConf } from '../config/dynamic.js'
import { ADMIN_STATES } from '../shm/layout.js'
import { setAdminState } from '../shm/server-state.js'
import { ApiError, type Draft } from './config-store.js'
import { type SchemaError, backendOf, backendTable, serverOf, serverTable } from './config-model.js'
import type { AdminContext } from './context.js'
import type { Answer, Request, Route, Surface } from './http-server.js'
import { apiInfo, specification } from './config-spec.js'
import { serverView } from './server-view.js'

const BASE = '/v2/services/lb'
const CFG = `${BASE}/configuration`
/** the Data Plane API's own prefix: existing clients hard-code it, so every route answers there too */
const HAPROXY_BASE = '/v2/services/haproxy'

/** query parameters every write takes (the Data Plane API's version/transaction pair, and force_reload) */
const WRITE_PARAMS = ['version', 'transaction_id', 'force_reload']
/** and the ones naming the parent backend of a server */
const SERVER_PARAMS = ['backend', 'parent_name']

/**
 * The checks the Data Plane API makes on the query before a handler runs.
 * lb has no transactions (yet): any transaction_id names a transaction that
 * does not exist, answered as client-native answers one (400) rather than
 * ignored, which would apply a change meant to be staged. On a write, a
 * query parameter the route does not take is a 400, never silently dropped.
 */
function checkQuery (req: Request, allowed: readonly string[] | null): void {
  const tx = req.query.get('transaction_id')
  if (allowed !== null) {
    for (const k of req.query.keys()) {
      if (!allowed.includes(k)) throw new ApiError(400, `unknown query parameter ${JSON.stringify(k)}: this endpoint takes ${allowed.join(', ')}`)
    }
    const fr = req.query.get('force_reload')
    if (fr !== null && fr !== 'true' && fr !== 'false') throw new ApiError(422, `force_reload in query must be of type boolean: ${JSON.stringify(fr)}`, 601)
    if (tx !== null && req.query.get('version') !== null) throw new ApiError(400, 'both version and transaction specified, specify only one', 400)
    if (tx !== null && fr === 'true') throw new ApiError(400, 'Both force_reload and transaction specified, specify only one', 400)
  }
  if (tx !== null) throw new ApiError(400, `transaction does not exist: transaction ${tx} does not exist`, 400)
}

function errorAnswer (status: number, code: number, message: string, version?: number): Answer {
  return { status, json: { code, message }, headers: version === undefined ? undefined : { 'configuration-version': String(version) } }
}

function versioned (ctx: AdminContext, status: number, json: unknown): Answer {
  return { status, json, headers: { 'configuration-version': String(ctx.store.version) } }
}

/** `?version=N`: absent → undefined; not an integer → 422 as go-openapi does. */
function versionParam (req: Request): number | undefined {
  const v = req.query.get('version')
  if (v === null) return undefined
  if (!/^\d+$/.test(v)) throw new ApiError(422, `version in query must be of type integer: ${JSON.stringify(v)}`, 601)
  return Number(v)
}

function parseBody (req: Request, what: string): unknown {
  const type = req.headers['content-type']
  if (type !== undefined && !/^application\/json\b/i.test(type)) {
    throw new ApiError(415, `unsupported media type ${JSON.stringify(type.split(';')[0])}, only [application/json] are allowed`)
  }
  if (req.body.trim() === '') throw new ApiError(400, `parsing ${what} body from "" failed, because EOF`)
  try {
    return JSON.parse(req.body)
  } catch (err) {
    throw new ApiError(400, `parsing ${what} body from "" failed, because ${(err as Error).message}`)
  }
}

function schemaFailure (errors: SchemaError[]): never {
  // go-openapi reports a single violation with its own code, several as a 422 composite list
  if (errors.length === 1) throw new ApiError(422, errors[0]!.message, errors[0]!.code)
  throw new ApiError(422, `validation failure list:\n${errors.map((e) => e.message).join('\n')}`, 422)
}

function proxyServices (ctx: AdminContext): ServiceConf[] {
  return ctx.config().services.filter((s) => s.kind === 'proxy')
}

function findBackend (ctx: AdminContext, name: string): ServiceConf {
  const s = proxyServices(ctx).find((x) => x.name === name)
  if (s === undefined) throw new ApiError(404, `missing object: Backend ${name} does not exist`)
  return s
}

function backendParam (req: Request): string {
  const b = req.query.get('backend') ?? req.query.get('parent_name')
  if (b === null || b === '') throw new ApiError(422, 'backend in query is required', 602)
  return b
}

function draftBackend (d: Draft, name: string): Table {
  const t = Object.hasOwn(d.services, name) ? d.services[name] : undefined
  if (t === undefined || (t.kind !== undefined && t.kind !== 'proxy')) throw new ApiError(404, `missing object: Backend ${name} does not exist`)
  return t
}

function draftServers (t: Table): Table[] {
  return Array.isArray(t.servers) ? (t.servers as Table[]).map((s, i) => ({ name: `s${i + 1}`, ...s })) : []
}

/** Wraps a handler so ApiErrors become {code, message} answers. */
function guard (ctx: AdminContext, h: (req: Request) => Answer | Promise<Answer>): (req: Request) => Promise<Answer> {
  return async (req) => {
    try {
      return await h(req)
    } catch (err) {
      if (err instanceof ApiError) return errorAnswer(err.status, err.code, err.message, ctx.store.version)
      throw err
    }
  }
}

export function configApi (ctx: AdminContext): Surface {
  const r = (method: Route['method'], path: string, help: string, handler: (req: Request) => Answer | Promise<Answer>): Route => {
    const mutates = method !== 'GET'
    // writes take the version/transaction parameters, plus the parent backend on server paths
    const allowed = !mutates ? null : path.includes('/runtime/') ? SERVER_PARAMS : path.includes('/servers') ? [...SERVER_PARAMS, ...WRITE_PARAMS] : WRITE_PARAMS
    return { method, path, help, mutates, handler: guard(ctx, (req) => { checkQuery(req, allowed); return handler(req) }) }
  }
  const routes: Route[] = [
    r('GET', `${CFG}/version`, 'configuration version (a bare integer)', () => versioned(ctx, 200, ctx.store.version)),
    r('GET', `${CFG}/backends`, 'list backends', () => versioned(ctx, 200, { _version: ctx.store.version, data: proxyServices(ctx).map(backendOf) })),
    r('POST', `${CFG}/backends`, 'create a backend: {"name", "balance": {"algorithm"}}; ?version=N optional', async (req) => {
      const version = versionParam(req)
      const made = backendTable(parseBody(req, 'backend'), null)
      if (Array.isArray(made)) schemaFailure(made)
      const { version: v } = await ctx.store.update(version, (d) => {
        if (made.name in d.services) throw new ApiError(409, `object already exists: backend ${made.name} already exists`)
        d.set(made.name, made.table)
      })
      return { status: 201, json: backendOf(findBackend(ctx, made.name)), headers: { 'configuration-version': String(v) } }
    }),
    r('GET', `${CFG}/backends/{name}`, 'one backend', (req) => versioned(ctx, 200, { _version: ctx.store.version, data: backendOf(findBackend(ctx, req.params.name!)) })),
    r('PUT', `${CFG}/backends/{name}`, 'replace a backend (its servers are kept)', async (req) => {
      const version = versionParam(req)
      const body = parseBody(req, 'backend')
      const name = req.params.name!
      const { version: v } = await ctx.store.update(version, (d) => {
        const prev = draftBackend(d, name)
        const made = backendTable(body, prev)
        if (Array.isArray(made)) schemaFailure(made)
        if (made.name !== name) throw new ApiError(400, `validation error: name in body (${made.name}) does not match the backend in the path (${name})`)
        d.set(name, made.table)
      })
      return { status: 200, json: backendOf(findBackend(ctx, name)), headers: { 'configuration-version': String(v) } }
    }),
    r('DELETE', `${CFG}/backends/{name}`, 'delete a backend', async (req) => {
      const version = versionParam(req)
      const name = req.params.name!
      const { version: v } = await ctx.store.update(version, (d) => {
        draftBackend(d, name)
        d.set(name, null)
      })
      return { status: 204, text: '', headers: { 'configuration-version': String(v) } }
    }),
    r('GET', `${CFG}/servers`, 'list servers of ?backend=NAME', (req) => {
      const b = findBackend(ctx, backendParam(req))
      return versioned(ctx, 200, { _version: ctx.store.version, data: b.servers.map(serverOf) })
    }),
    r('POST', `${CFG}/servers`, 'add a server to ?backend=NAME: {"name", "address", "port", "weight", "check", "maintenance"}', async (req) => {
      const backend = backendParam(req)
      const version = versionParam(req)
      const body = parseBody(req, 'server')
      findBackend(ctx, backend)
      const made = serverTable(body, null)
      if (Array.isArray(made)) schemaFailure(made)
      const { version: v } = await ctx.store.update(version, (d) => {
        const t = draftBackend(d, backend)
        const servers = draftServers(t)
        if (servers.some((s) => s.name === made.name)) throw new ApiError(409, `object already exists: server ${made.name} already exists in backend ${backend}`)
        d.set(backend, { ...t, servers: [...servers, made.table] })
      })
      return { status: 201, json: serverOf(findServer(ctx, backend, made.name)), headers: { 'configuration-version': String(v) } }
    }),
    r('GET', `${CFG}/servers/{name}`, 'one server of ?backend=NAME', (req) => {
      const backend = backendParam(req)
      return versioned(ctx, 200, { _version: ctx.store.version, data: serverOf(findServer(ctx, backend, req.params.name!)) })
    }),
    r('PUT', `${CFG}/servers/{name}`, 'replace a server of ?backend=NAME', async (req) => {
      const backend = backendParam(req)
      const version = versionParam(req)
      const body = parseBody(req, 'server')
      const name = req.params.name!
      const { version: v } = await ctx.store.update(version, (d) => {
        const t = draftBackend(d, backend)
        const servers = draftServers(t)
        const i = servers.findIndex((s) => s.name === name)
        if (i < 0) throw new ApiError(404, `missing object: Server ${name} does not exist in backend ${backend}`)
        const made = serverTable(body, servers[i]!)
        if (Array.isArray(made)) schemaFailure(made)
        if (made.name !== name) throw new ApiError(400, `validation error: name in body (${made.name}) does not match the server in the path (${name})`)
        servers[i] = made.table
        d.set(backend, { ...t, servers })
      })
      return { status: 200, json: serverOf(findServer(ctx, backend, name)), headers: { 'configuration-version': String(v) } }
    }),
    r('DELETE', `${CFG}/servers/{name}`, 'delete a server of ?backend=NAME', async (req) => {
      const backend = backendParam(req)
      const version = versionParam(req)
      const name = req.params.name!
      const { version: v } = await ctx.store.update(version, (d) => {
        const t = draftBackend(d, backend)
        const servers = draftServers(t)
        if (!servers.some((s) => s.name === name)) throw new ApiError(404, `missing object: Server ${name} does not exist in backend ${backend}`)
        d.set(backend, { ...t, servers: servers.filter((s) => s.name !== name) })
      })
      return { status: 204, text: '', headers: { 'configuration-version': String(v) } }
    }),
    r('GET', `${BASE}/runtime/servers`, 'runtime state of the servers of ?backend=NAME (admin_state, operational_state)', (req) => {
      const b = findBackend(ctx, backendParam(req))
      return { status: 200, json: b.servers.map((s, i) => runtimeServer(ctx, b, s.name, i)) }
    }),
    r('GET', `${BASE}/runtime/servers/{name}`, 'runtime state of one server of ?backend=NAME', (req) => {
      const b = findBackend(ctx, backendParam(req))
      const i = b.servers.findIndex((s) => s.name === req.params.name)
      if (i < 0) throw new ApiError(404, `missing object: Server ${req.params.name!} does not exist in backend ${b.name}`)
      return { status: 200, json: runtimeServer(ctx, b, req.params.name!, i) }
    }),
    r('PUT', `${BASE}/runtime/servers/{name}`, 'set a server\'s admin_state (ready|drain|maint) without a reload, as the runtime socket does', (req) => {
      const b = findBackend(ctx, backendParam(req))
      const i = b.servers.findIndex((s) => s.name === req.params.name)
      if (i < 0) throw new ApiError(404, `missing object: Server ${req.params.name!} does not exist in backend ${b.name}`)
      const body = parseBody(req, 'runtime server')
      const t = typeof body === 'object' && body !== null && !Array.isArray(body) ? body as Table : null
      if (t === null) throw new ApiError(422, 'body must be of type object', 601)
      for (const k of Object.keys(t)) if (!['admin_state', 'name', 'address', 'port', 'id', 'operational_state'].includes(k)) throw new ApiError(422, `${k} in body is a forbidden property`, 616)
      const state = t.admin_state
      if (state !== 'ready' && state !== 'drain' && state !== 'maint') throw new ApiError(422, 'admin_state in body should be one of [ready maint drain]', 606)
      const slot = ctx.slots.server(b.name, req.params.name!)!
      setAdminState(ctx.shm.i32, slot, ctx.slots.service(b.name)!, ADMIN_STATES.indexOf(state))
      return { status: 200, json: runtimeServer(ctx, b, req.params.name!, i) }
    }),
    r('GET', '/v2/info', 'API and system information (Data Plane API info model)', () => ({ status: 200, json: apiInfo(ctx) })),
    r('GET', '/v2/specification', 'the OpenAPI document of the routes lb implements', () => ({ status: 200, json: specification() })),
  ]
  const aliases = routes.filter((x) => x.path.startsWith(BASE)).map((x) => ({ ...x, path: HAPROXY_BASE + x.path.slice(BASE.length), help: `alias of ${x.path}` }))
  return {
    name: 'config API (HAProxy Data Plane API v2)',
    routes: [...routes, ...aliases],
    notFound: (path) => errorAnswer(404, 404, `path ${path} was not found`),
    methodNotAllowed: (path) => errorAnswer(405, 405, `method not allowed on ${path}`),
    internalError: (err) => errorAnswer(500, 500, err.message),
  }
}

function findServer (ctx: AdminContext, backend: string, name: string): ServiceConf['servers'][number] {
  const b = findBackend(ctx, backend)
  const s = b.servers.find((x) => x.name === name)
  if (s === undefined) throw new ApiError(404, `missing object: Server ${name} does not exist in backend ${backend}`)
  return s
}

function runtimeServer (ctx: AdminContext, b: ServiceConf, name: string, index: number): Record<string, unknown> {
  const srv = b.servers[index]!
  const v = serverView(ctx, b, srv)
  const addr = serverOf(srv)
  return { id: String(index + 1), name, address: addr.address, port: addr.port, admin_state: v.admin, operational_state: v.operational }
}
