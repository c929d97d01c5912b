// The config API's stick-table routes: the Data Plane API v2's runtime
// stick_tables and stick_table_entries (GET), over lb's rate limits
// (core/admin/rate-tables.ts), plus DELETE stick_table_entries?key=, which the
// Data Plane API lacks (its clients reach `clear table` only through the
// runtime socket): lb's extension, the same operation as `clear table <t> key <k>`.
import { ApiError } from './config-store.js'
import type { AdminContext } from '../context.js'
import type { Answer, Request } from '../http-server.js'
import { type Filter, type StickTable, clearSource, entries, entryOf, fields, findStickTable, keyOf, parseFilter, stickTables, used } from '../rate-tables.js'
import type { EntryView } from '../../shm/rate-entries.js'

type Handler = (req: Request) => Answer | Promise<Answer>

/** The Data Plane API's stick_table model. */
function tableModel (t: StickTable): Record<string, unknown> {
  return {
    name: t.lt.name,
    type: 'ip',
    size: t.size,
    used: used(t),
    fields: fields(t).map((f) => f.period === undefined ? { field: f.name, type: f.type } : { field: f.name, type: f.type, period: f.period }),
  }
}

/** The Data Plane API's stick_table_entry model: id, key, use, exp and the stored data types by name. */
function entryModel (t: StickTable, e: EntryView): Record<string, unknown> {
  const out: Record<string, unknown> = { id: `0x${e.way.toString(16)}`, key: e.key, use: false, exp: e.expMs }
  for (const f of fields(t)) out[f.name] = f.read(e)
  return out
}

function table (ctx: AdminContext, req: Request): StickTable {
  const name = req.query.get('stick_table') ?? req.query.get('parent_name')
  if (name === null || name === '') throw new ApiError(422, 'stick_table in query is required', 602)
  const t = findStickTable(ctx, name)
  if (t === null) throw new ApiError(404, `missing object: stick table ${name} does not exist`)
  return t
}

/** ?filter=data.<type> <op> <value>[,...]: the Data Plane API's form of the runtime socket's filters. */
function filtersOf (t: StickTable, raw: string | null): Filter[] {
  if (raw === null || raw === '') return []
  return raw.split(',').map((part) => {
    const [type, op, value, ...rest] = part.trim().split(/\s+/)
    if (type === undefined || !type.startsWith('data.') || rest.length > 0) throw new ApiError(400, `filter ${JSON.stringify(part)}: expected data.<type> <operator> <value>`)
    const f = parseFilter(t, type.slice(5), op, value)
    if (typeof f === 'string') throw new ApiError(400, `filter ${JSON.stringify(part)}: ${f}`)
    return f
  })
}

function count (req: Request, name: string): number | undefined {
  const v = req.query.get(name)
  if (v === null) return undefined
  if (!/^\d{1,9}$/.test(v)) throw new ApiError(422, `${name} in query must be of type integer: ${JSON.stringify(v)}`, 601)
  return Number(v)
}

export function tableRoutes<R> (ctx: AdminContext, base: string, r: (method: 'GET' | 'DELETE', path: string, help: string, handler: Handler, params?: readonly string[]) => R): R[] {
  return [
    r('GET', `${base}/runtime/stick_tables`, 'the rate limits as stick tables: name, type, size, used, fields', () =>
      ({ status: 200, json: stickTables(ctx).map(tableModel) })),
    r('GET', `${base}/runtime/stick_tables/{name}`, 'one rate limit as a stick table', (req) => {
      const t = findStickTable(ctx, req.params.name!)
      if (t === null) throw new ApiError(404, `missing object: stick table ${req.params.name!} does not exist`)
      return { status: 200, json: tableModel(t) }
    }),
    r('GET', `${base}/runtime/stick_table_entries`, 'entries of ?stick_table=NAME, highest count first (?key=ADDRESS, ?filter=data.<type> <op> <value>, ?count, ?offset)', (req) => {
      const t = table(ctx, req)
      const key = req.query.get('key')
      if (key !== null) {
        const e = entryOf(t, key)
        if (e === 'invalid') throw new ApiError(400, `key ${JSON.stringify(key)} is not an IP address (the key type of table ${t.lt.name})`)
        return { status: 200, json: e === null ? [] : [entryModel(t, e)] }
      }
      const list = entries(t, filtersOf(t, req.query.get('filter')))
      const offset = count(req, 'offset') ?? 0
      const n = count(req, 'count')
      return { status: 200, json: list.slice(offset, n === undefined ? undefined : offset + n).map((e) => entryModel(t, e)) }
    }),
    r('DELETE', `${base}/runtime/stick_table_entries`, 'forget the source ?key=ADDRESS of ?stick_table=NAME (a cluster-scope limit: on every node); lb\'s extension', async (req) => {
      const t = table(ctx, req)
      const key = req.query.get('key')
      if (key === null || key === '') throw new ApiError(422, 'key in query is required', 602)
      const k = keyOf(t, key)
      if (k === null) throw new ApiError(400, `key ${JSON.stringify(key)} is not an IP address (the key type of table ${t.lt.name})`)
      ctx.log.info('config API: stick table entry cleared', { table: t.lt.name, key })
      const failed = await clearSource(ctx, t, k.ka, k.kb)
      if (failed !== null) throw new ApiError(503, `cleared on this node only: Redis did not answer (${failed}); the other nodes keep their counts until the entries expire`)
      return { status: 204, text: '' }
    }, ['stick_table', 'parent_name', 'key', 'process']),
  ]
}
