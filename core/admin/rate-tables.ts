// Rate limits as HAProxy stick tables, for `show table` / `clear table` on the
// runtime socket and the config API's runtime/stick_table(s|_entries): one
// table per rateLimit middleware, named after it, keyed by source address
// ("type: ip"), holding what the limit counts per source (HAProxy's data
// types: http_req_rate(<period>) for a sliding window, which is exactly
// HAProxy's `store http_req_rate(10s)`; lb's own bucket_level for the buckets;
// cluster_* with the other nodes' counts for scope = "cluster"). Entries are
// listed by count, highest first, so the top sources come first.
import type { RateLimitConf } from '../../plugins/rate-limit.js'
import { limitTable } from '../../plugins/rate-limit.js'
import { now } from '../clock.js'
import { CLUSTER_SETS, RATE_ENTRIES, RATE_WAYS } from '../shm/layout.js'
import { clusterTable } from '../shm/cluster-table.js'
import { type EntryView, type LimitTable, findEntry, listEntries } from '../shm/rate-entries.js'
import { RateTable } from '../shm/rate-table.js'
import type { AdminCore } from './core.js'

export interface StickTable {
  readonly lt: LimitTable
  readonly table: RateTable
  /** the cluster extras' offset (cluster table), -1 for the local table */
  readonly cx: number
  /** entries the table can hold (all its limits together) */
  readonly size: number
}

/** A data type of a table: its name (as filters write it), its column label, and how to read it from an entry. */
export interface Field {
  readonly name: string
  readonly label: string
  /** the Data Plane API's stick table field: type and period */
  readonly type: 'rate' | 'counter'
  readonly period?: number
  read (e: EntryView): number
}

/** Every rateLimit middleware of the running configuration, in its order. */
export function stickTables (ctx: Pick<AdminCore, 'config' | 'shm'>): StickTable[] {
  const i32 = ctx.shm.i32
  return ctx.config().middlewares.filter((m) => m.type === 'rateLimit').map((m) => {
    const lt = limitTable(m.name, m.conf as RateLimitConf)
    // a cluster-scope limit without [cluster] counts in the local table (plugins/rate-limit.ts)
    const c = lt.scope === 'cluster' ? clusterTable(i32) : null
    if (c !== null) return { lt, table: c.table, cx: c.cx, size: CLUSTER_SETS * RATE_WAYS }
    return { lt, table: new RateTable(i32), cx: -1, size: RATE_ENTRIES }
  })
}

export function findStickTable (ctx: Pick<AdminCore, 'config' | 'shm'>, name: string): StickTable | null {
  return stickTables(ctx).find((t) => t.lt.name === name) ?? null
}

/** The data types an entry of `t` shows, in order: this node's count, then (cluster) the cluster's. */
export function fields (t: StickTable): Field[] {
  const window = t.lt.kind === 'window'
  const own: Field = window
    ? { name: 'http_req_rate', label: `http_req_rate(${t.lt.periodMs})`, type: 'rate', period: t.lt.periodMs, read: (e) => e.count }
    : { name: 'bucket_level', label: 'bucket_level', type: 'counter', read: (e) => e.count }
  if (t.cx < 0) return [own]
  const cluster: Field = window
    ? { name: 'cluster_req_rate', label: `cluster_req_rate(${t.lt.periodMs})`, type: 'rate', period: t.lt.periodMs, read: (e) => e.cluster ?? e.count }
    : { name: 'cluster_bucket_level', label: 'cluster_bucket_level', type: 'counter', read: (e) => e.cluster ?? e.count }
  return [own, cluster]
}

export const OPERATORS = ['eq', 'ne', 'le', 'ge', 'lt', 'gt'] as const
export type Operator = typeof OPERATORS[number]

export interface Filter { readonly field: Field, readonly op: Operator, readonly value: number }

/** HAProxy's stick-table data types: a filter on one of these that lb does not store is "not stored", any other "unknown". */
const HAPROXY_TYPES = new Set(['server_id', 'server_key', 'server_name', 'gpt0', 'gpt', 'gpc0', 'gpc0_rate', 'gpc1', 'gpc1_rate', 'gpc', 'gpc_rate', 'conn_cnt', 'conn_cur',
  'conn_rate', 'sess_cnt', 'sess_rate', 'http_req_cnt', 'http_req_rate', 'http_err_cnt', 'http_err_rate', 'http_fail_cnt', 'http_fail_rate', 'bytes_in_cnt',
  'bytes_in_rate', 'bytes_out_cnt', 'bytes_out_rate', 'glitch_cnt', 'glitch_rate'])

/** `data.<type> <op> <value>` of `t`; a string is HAProxy's error message. */
export function parseFilter (t: StickTable, type: string, op: string | undefined, value: string | undefined): Filter | string {
  const field = fields(t).find((f) => f.name === type)
  if (field === undefined) {
    const known = HAPROXY_TYPES.has(type) || ['cluster_req_rate', 'bucket_level', 'cluster_bucket_level'].includes(type)
    return known ? 'Data type not stored in this table' : 'Unknown data type'
  }
  if (!(OPERATORS as readonly string[]).includes(op ?? '')) return 'Require and operator among "eq", "ne", "le", "ge", "lt", "gt"'
  if (value === undefined || !/^-?\d{1,15}$/.test(value)) return 'Require a valid integer value to compare against'
  return { field, op: op as Operator, value: Number(value) }
}

function matches (e: EntryView, f: Filter): boolean {
  const v = f.field.read(e)
  switch (f.op) {
    case 'eq': return v === f.value
    case 'ne': return v !== f.value
    case 'le': return v <= f.value
    case 'ge': return v >= f.value
    case 'lt': return v < f.value
    case 'gt': return v > f.value
  }
}

/** The live entries of `t` passing every filter, highest count first (the cluster's for a cluster table), then by key. */
export function entries (t: StickTable, filters: readonly Filter[] = []): EntryView[] {
  const main = fields(t).at(-1)!
  return listEntries(t.table, t.cx, t.lt, now())
    .filter((e) => filters.every((f) => matches(e, f)))
    .sort((a, b) => main.read(b) - main.read(a) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
}

/** The entry of one source, by the address an operator writes; 'invalid' when it is not an address. */
export function entryOf (t: StickTable, source: string): EntryView | null | 'invalid' {
  const k = t.lt.keyOf(source)
  if (k === null) return 'invalid'
  return findEntry(t.table, t.cx, t.lt, k.ka, k.kb, now())
}

/** Entries in use by `t` now (the header's `used`). */
export function used (t: StickTable): number {
  return listEntries(t.table, t.cx, t.lt, now()).length
}

/**
 * Forgets one source of `t` (by its table key): here, and for a cluster table
 * on every node through Redis. Resolves to null, or to why the other nodes
 * could not be told (Redis did not answer: forgotten on this node only).
 */
export async function clearSource (ctx: Pick<AdminCore, 'clusterClear'>, t: StickTable, ka: number, kb: number): Promise<string | null> {
  if (t.cx < 0 || ctx.clusterClear === undefined) {
    t.table.clear(ka, kb, t.cx)
    return null
  }
  try {
    await ctx.clusterClear(ka, kb)
    return null
  } catch (err) {
    return (err as Error).message
  }
}

/** The table key of a source an operator wrote; null when it is not an address. */
export function keyOf (t: StickTable, source: string): { ka: number, kb: number } | null {
  return t.lt.keyOf(source)
}
