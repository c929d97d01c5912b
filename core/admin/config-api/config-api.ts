// The configuration API: HAProxy Data Plane API v2 paths with `lb` in place of
// `haproxy`. Backends are the config's services of kind "proxy". GET bodies are
// {"_version": N, "data": ...}; writes answer the stored object; every answer
// carries Configuration-Version. Errors are {code, message}: 404 missing
// object, 409 exists / version mismatch, 400 unparsable body or validation
// error, 422 schema violation (go-openapi codes 6xx), 415 not JSON.
// Every configuration read and write also works inside a transaction
// (?transaction_id=ID, core/admin/config-api/transactions.ts): writes are staged and
// answered 202, reads see the configuration the transaction would make.
import type { Table } from '../../config/check.js'
import type { ServiceConf } from '../../config/dynamic.js'
import type { Config } from '../../configure.js'
import { ADMIN_STATES } from '../../shm/layout.js'
import { setAdminState } from '../../shm/server-state.js'
import { ApiError, type Draft } from './config-store.js'
import { type SchemaError, backendOf, backendTable, serverOf, serverTable } from './config-model.js'
import type { AdminContext } from '../context.js'
import type { Answer, Request, Route, Surface } from '../http-server.js'
import { apiInfo, specification } from './config-spec.js'
import { SERVER_PARAMS, WRITE_PARAMS, backendParam, checkQuery, parseBody, versionParam } from '../api-request.js'
import { serverView } from '../server-view.js'
import { tableRoutes } from './table-api.js'
import { type Change, TX_STATUSES, type TxStatus, type TxView, Transactions } from './transactions.js'

const BASE = '/v2/services/lb'
const CFG = `${BASE}/configuration`
/** the Data Plane API's own prefix: existing clients hard-code it, so every route answers there too */
const HAPROXY_BASE = '/v2/services/haproxy'

function errorAnswer (status: number, code: number, message: string, version?: number): Answer {
  return { status, json: { code, message }, headers: version === undefined ? undefined : { 'configuration-version': String(version) } }
}

function versioned (ctx: AdminContext, status: number, json: unknown): Answer {
  return { status, json, headers: { 'configuration-version': String(ctx.store.version) } }
}

function schemaFailure (errors: SchemaError[]): never {
  // go-openapi reports a single violation with its own code, several as a 422 composite list
  if (errors.length === 1) throw new ApiError(422, errors[0]!.message, errors[0]!.code)
  throw new ApiError(422, `validation failure list:\n${errors.map((e) => e.message).join('\n')}`, 422)
}

function proxyServices (conf: Config): ServiceConf[] {
  return conf.services.filter((s) => s.kind === 'proxy')
}

function findBackend (conf: Config, name: string): ServiceConf {
  const s = proxyServices(conf).find((x) => x.name === name)
  if (s === undefined) throw new ApiError(404, `missing object: Backend ${name} does not exist`)
  return s
}

function findServer (conf: Config, backend: string, name: string): ServiceConf['servers'][number] {
  const s = findBackend(conf, backend).servers.find((x) => x.name === name)
  if (s === undefined) throw new ApiError(404, `missing object: Server ${name} does not exist in backend ${backend}`)
  return s
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

/** The outcome of a write: applied (a new version) or staged in a transaction (202, the transaction's view). */
interface Written {
  readonly staged: boolean
  /** the configuration after the write; null: a staged write left a transaction that does not validate (yet) */
  readonly config: Config | null
  readonly version: number
}

export function configApi (ctx: AdminContext): Surface {
  const txs = new Transactions(ctx.store, ctx.config().admin.maxOpenTransactions, ctx.config().admin.maxTransactionChanges)
  const r = (method: Route['method'], path: string, help: string, handler: (req: Request) => Answer | Promise<Answer>, params?: readonly string[]): Route => {
    const mutates = method !== 'GET'
    // writes take the version/transaction parameters, plus the parent backend on server paths
    const allowed = params ?? (!mutates ? null : path.includes('/runtime/') ? SERVER_PARAMS : path.includes('/servers') ? [...SERVER_PARAMS, ...WRITE_PARAMS] : WRITE_PARAMS)
    return { method, path, help, mutates, handler: guard(ctx, (req) => { checkQuery(req, allowed, path.startsWith(CFG)); return handler(req) }) }
  }
  /** what a read sees: the running configuration, or the one ?transaction_id would make */
  const view = (req: Request): { conf: Config, version: number } => {
    const tx = req.query.get('transaction_id')
    if (tx === null) return { conf: ctx.config(), version: ctx.store.version }
    const v = txs.view(tx)
    if (v.config === null) throw new ApiError(400, `transaction ${tx} does not validate as a whole (its commit would fail): ${v.invalid!.message}`)
    return { conf: v.config, version: v.version }
  }
  const write = async (req: Request, version: number | undefined, change: Change): Promise<Written> => {
    const tx = req.query.get('transaction_id')
    if (tx !== null) {
      const v: TxView = txs.record(tx, change)
      return { staged: true, config: v.config, version: v.version }
    }
    const { version: v } = await ctx.store.update(version, change)
    return { staged: false, config: ctx.config(), version: v }
  }
  /** A write's answer: `status` when applied, 202 when staged (as the Data Plane API); the object as stored, or the body as sent when the staged configuration does not validate yet (the Data Plane API always echoes it). */
  const written = (w: Written, status: number, body: unknown, stored: (c: Config) => unknown): Answer => {
    const headers = { 'configuration-version': String(w.version) }
    if (status === 204) return w.staged ? { status: 202, text: '', headers } : { status, text: '', headers }
    return { status: w.staged ? 202 : status, json: w.config === null ? body : stored(w.config), headers }
  }
  const listed = (req: Request, data: (c: Config) => unknown): Answer => {
    const { conf, version } = view(req)
    return { status: 200, json: { _version: version, data: data(conf) }, headers: { 'configuration-version': String(version) } }
  }
  const routes: Route[] = [
    r('GET', `${CFG}/version`, 'configuration version (a bare integer)', (req) => {
      const { version } = view(req)
      return { status: 200, json: version, headers: { 'configuration-version': String(version) } }
    }),
    r('GET', `${CFG}/backends`, 'list backends', (req) => listed(req, (c) => proxyServices(c).map(backendOf))),
    r('POST', `${CFG}/backends`, 'create a backend: {"name", "balance": {"algorithm"}}; ?version=N optional', async (req) => {
      const version = versionParam(req)
      const body = parseBody(req, 'backend')
      const made = backendTable(body, null)
      if (Array.isArray(made)) schemaFailure(made)
      const w = await write(req, version, (d) => {
        if (made.name in d.services) throw new ApiError(409, `object already exists: backend ${made.name} already exists`)
        d.set(made.name, made.table)
      })
      return written(w, 201, body, (c) => backendOf(findBackend(c, made.name)))
    }),
    r('GET', `${CFG}/backends/{name}`, 'one backend', (req) => listed(req, (c) => backendOf(findBackend(c, req.params.name!)))),
    r('PUT', `${CFG}/backends/{name}`, 'replace a backend (its servers are kept)', async (req) => {
      const version = versionParam(req)
      const body = parseBody(req, 'backend')
      const name = req.params.name!
      const w = await write(req, version, (d) => {
        const prev = draftBackend(d, name)
        const made = backendTable(body, prev)
        if (Array.isArray(made)) schemaFailure(made)
        if (made.name !== name) throw new ApiError(400, `validation error: name in body (${made.name}) does not match the backend in the path (${name})`)
        d.set(name, made.table)
      })
      return written(w, 200, body, (c) => backendOf(findBackend(c, name)))
    }),
    r('DELETE', `${CFG}/backends/{name}`, 'delete a backend', async (req) => {
      const version = versionParam(req)
      const name = req.params.name!
      const w = await write(req, version, (d) => {
        draftBackend(d, name)
        d.set(name, null)
      })
      return written(w, 204, null, () => null)
    }),
    r('GET', `${CFG}/servers`, 'list servers of ?backend=NAME', (req) => {
      const backend = backendParam(req)
      return listed(req, (c) => findBackend(c, backend).servers.map(serverOf))
    }),
    r('POST', `${CFG}/servers`, 'add a server to ?backend=NAME: {"name", "address", "port", "weight", "check", "maintenance"}', async (req) => {
      const backend = backendParam(req)
      const version = versionParam(req)
      const body = parseBody(req, 'server')
      const made = serverTable(body, null)
      // a missing backend is answered before a bad body: outside a transaction here, inside it by the staged change
      if (req.query.get('transaction_id') === null) {
        findBackend(ctx.config(), backend)
        if (Array.isArray(made)) schemaFailure(made)
      }
      const w = await write(req, version, (d) => {
        const t = draftBackend(d, backend)
        if (Array.isArray(made)) schemaFailure(made)
        const servers = draftServers(t)
        if (servers.some((s) => s.name === made.name)) throw new ApiError(409, `object already exists: server ${made.name} already exists in backend ${backend}`)
        d.set(backend, { ...t, servers: [...servers, made.table] })
      })
      return written(w, 201, body, (c) => serverOf(findServer(c, backend, (made as { name: string }).name)))
    }),
    r('GET', `${CFG}/servers/{name}`, 'one server of ?backend=NAME', (req) => {
      const backend = backendParam(req)
      return listed(req, (c) => serverOf(findServer(c, backend, req.params.name!)))
    }),
    r('PUT', `${CFG}/servers/{name}`, 'replace a server of ?backend=NAME', async (req) => {
      const backend = backendParam(req)
      const version = versionParam(req)
      const body = parseBody(req, 'server')
      const name = req.params.name!
      const w = await write(req, version, (d) => {
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
      return written(w, 200, body, (c) => serverOf(findServer(c, backend, name)))
    }),
    r('DELETE', `${CFG}/servers/{name}`, 'delete a server of ?backend=NAME', async (req) => {
      const backend = backendParam(req)
      const version = versionParam(req)
      const name = req.params.name!
      const w = await write(req, version, (d) => {
        const t = draftBackend(d, backend)
        const servers = draftServers(t)
        if (!servers.some((s) => s.name === name)) throw new ApiError(404, `missing object: Server ${name} does not exist in backend ${backend}`)
        d.set(backend, { ...t, servers: servers.filter((s) => s.name !== name) })
      })
      return written(w, 204, null, () => null)
    }),
    r('GET', `${BASE}/transactions`, 'list transactions (?status=in_progress|failed|outdated)', (req) => {
      const st = req.query.get('status')
      if (st !== null && !(TX_STATUSES as readonly string[]).includes(st)) throw new ApiError(422, `status in query should be one of [${TX_STATUSES.join(' ')}]`, 606)
      return versioned(ctx, 200, txs.list(st as TxStatus | null))
    }),
    r('POST', `${BASE}/transactions`, 'start a transaction on ?version=N (the current version)', (req) => {
      const version = versionParam(req)
      if (version === undefined) throw new ApiError(422, 'version in query is required', 602)
      return versioned(ctx, 201, txs.start(version))
    }, ['version']),
    r('GET', `${BASE}/transactions/{id}`, 'one transaction', (req) => versioned(ctx, 200, txs.get(req.params.id!))),
    r('PUT', `${BASE}/transactions/{id}`, 'commit a transaction: all its changes as one version, or none', async (req) => {
      const { model, version } = await txs.commit(req.params.id!)
      return { status: 200, json: model, headers: { 'configuration-version': String(version) } }
    }, ['force_reload']),
    r('DELETE', `${BASE}/transactions/{id}`, 'delete a transaction (nothing of it is applied)', (req) => {
      txs.drop(req.params.id!)
      return { status: 204, text: '', headers: { 'configuration-version': String(ctx.store.version) } }
    }, []),
    r('GET', `${BASE}/runtime/servers`, 'runtime state of the servers of ?backend=NAME (admin_state, operational_state)', (req) => {
      const b = findBackend(ctx.config(), backendParam(req))
      return { status: 200, json: b.servers.map((s, i) => runtimeServer(ctx, b, s.name, i)) }
    }),
    r('GET', `${BASE}/runtime/servers/{name}`, 'runtime state of one server of ?backend=NAME', (req) => {
      const b = findBackend(ctx.config(), backendParam(req))
      const i = b.servers.findIndex((s) => s.name === req.params.name)
      if (i < 0) throw new ApiError(404, `missing object: Server ${req.params.name!} does not exist in backend ${b.name}`)
      return { status: 200, json: runtimeServer(ctx, b, req.params.name!, i) }
    }),
    r('PUT', `${BASE}/runtime/servers/{name}`, 'set a server\'s admin_state (ready|drain|maint) without a reload, as the runtime socket does', (req) => {
      const b = findBackend(ctx.config(), backendParam(req))
      const i = b.servers.findIndex((s) => s.name === req.params.name)
      if (i < 0) throw new ApiError(404, `missing object: Server ${req.params.name!} does not exist in backend ${b.name}`)
      const body = parseBody(req, 'runtime server')
      const t = typeof body === 'object' && body !== null && !Array.isArray(body) ? body as Table : null
      if (t === null) throw new ApiError(422, 'body must be of type object', 601)
      for (const k of Object.keys(t)) if (!['admin_state', 'name', 'address', 'port', 'id', 'operational_state'].includes(k)) throw new ApiError(422, `${k} in body is a forbidden property`, 616)
      const state = t.admin_state
      if (state !== 'ready' && state !== 'drain' && state !== 'maint') throw new ApiError(422, 'admin_state in body should be one of [ready maint drain]', 606)
      const slot = ctx.slots.server(b.name, req.params.name!)
      const serviceSlot = ctx.slots.service(b.name)
      // both exist whenever the server is in the running configuration (SlotRegistry.commit); checked all the same, as the runtime socket does
      if (slot === undefined || serviceSlot === undefined) throw new ApiError(404, `missing object: Server ${req.params.name!} does not exist in backend ${b.name}`)
      setAdminState(ctx.shm.i32, slot, serviceSlot, ADMIN_STATES.indexOf(state))
      return { status: 200, json: runtimeServer(ctx, b, req.params.name!, i) }
    }),
    ...tableRoutes(ctx, BASE, r),
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

function runtimeServer (ctx: AdminContext, b: ServiceConf, name: string, index: number): Record<string, unknown> {
  const srv = b.servers[index]!
  const v = serverView(ctx, b, srv)
  const addr = serverOf(srv)
  return { id: String(index + 1), name, address: addr.address, port: addr.port, admin_state: v.admin, operational_state: v.operational }
}
