// The middleware plugin contract. A plugin is one module exporting one
// definition: a name, a config validator and a factory of hooks. `create` runs
// once per middleware instance per config generation in every worker; its
// hooks run per request, compiled into each route's chain at load time.
//
// Plugins (built-in and third-party) reach it through core/plugin-api.ts, the
// one module package.json exports as "lb/plugin"; core modules import this file.
// A middleware's `type` may name a module, by path relative to the config file
// or by package name, whose default export is a PluginDef. PLUGINS.md walks
// through one.
import type { Transform } from 'node:stream'
import type { Checker, Table } from './config/check.js'
import type { Logger } from './log.js'
import type { Shm } from './shm/layout.js'
import type { Revocation } from './shm/revocations.js'
import type { FilterFactory } from './worker/request/client-filter.js'
import type { Ctx } from './worker/request/context.js'

/**
 * The plugin-API version of this lb: its major number changes when a change to
 * this contract would break a plugin written for the previous one. A plugin
 * declares the version it was written for (`api`); lb refuses another.
 */
export const PLUGIN_API = 1

export const NEXT = 0
export const HANDLED = 1
export type Verdict = typeof NEXT | typeof HANDLED

/** What a response hook may change before the head goes to the client. */
export interface ResponseHead {
  status: number
  /**
   * flat [name, value, ...] as they will be sent, names as the upstream wrote
   * them (compare case-insensitively); hooks may push or edit. Content-Length
   * is not among them: the proxy writes it.
   */
  headers: string[]
  /**
   * A body transform (e.g. a node:zlib stream) set by at most one hook; null by
   * default. When set, the proxy streams the upstream body through it with
   * backpressure both ways and sends the result chunked, without
   * Content-Length. The hook that sets it adjusts the headers it implies
   * (Content-Encoding, Vary).
   */
  transform: Transform | null
  /**
   * true for a HEAD request or a status without a body (1xx, 204, 304): a transform is never applied.
   * For HEAD a hook should decide as for GET (RFC 9110 §9.3.2: the same fields); a transform it sets
   * is not run, and the answer then carries no Content-Length, as the GET's would not.
   */
  readonly noBody: boolean
  /** the upstream's Content-Length, -1 when unknown (chunked or close-delimited) */
  readonly contentLength: number
}

export interface Hooks {
  /** NEXT to continue, HANDLED after setting ctx.reply. A Promise only when it must await. */
  onRequest?: (ctx: Ctx) => Verdict | Promise<Verdict>
  /** called once with the response head, before it is sent */
  onResponse?: (ctx: Ctx, head: ResponseHead) => void
  /**
   * Called once when this instance is retired: a reload replaced it (every
   * generation creates its instances anew) or dropped it, or the worker shuts
   * down. Stops what create() started (timers, sockets, watchers). Requests of
   * the retired generation may still be finishing: their hooks keep working.
   */
  teardown?: () => void
}

export interface PluginEnv {
  readonly log: Logger
  readonly shm: Shm
  /** name of the middleware instance */
  readonly name: string
  /**
   * Publishes the instance's state on the dashboard API (its middleware's
   * `status`, and `message`): 'enabled' when it works, 'warning' with why not
   * (e.g. a provider it cannot reach). Optional: an lb without it ignores the call.
   */
  readonly setStatus?: (status: PluginStatus, message: string) => void
  /**
   * Shares a revocation the instance has added to this node's table (`Revocations` of `lb/plugin`, which
   * every worker of the node reads at once) with the control plane: it keeps it in the state folder (a
   * restart keeps it) and, with [cluster], hands it to every other node. Resolves once every live node has
   * it, or after a bound (docs/cluster.md, "Session revocations"); never rejects. Optional: an lb without it
   * keeps revocations in this node's memory only.
   */
  readonly shareRevocation?: (r: Revocation) => Promise<void>
}

export type PluginStatus = 'enabled' | 'warning'

export interface PluginDef<C = unknown> {
  readonly name: string
  /** the plugin-API version (PLUGIN_API) the plugin was written for */
  readonly api: number
  /** Validates the middleware's table (without `type`); records problems on `c`. */
  validate (c: Checker, t: Table, path: string, baseDir: string): C
  create (conf: C, env: PluginEnv): Hooks
}

export function definePlugin<C> (def: PluginDef<C>): PluginDef<C> {
  return def
}

// --- helpers for hooks. The per-request header lists on Ctx may be shared,
// pre-rendered arrays (a plugin may assign its frozen list to an empty slot to
// avoid allocating): never push into them, extend them with these helpers.

/**
 * Runs `fn` once when the request ends, however it ends: answered by the backend or by lb, failed, or
 * the client gone (WebSocket: when the tunnel closes). For what a hook took for the request and must
 * give back (inFlightReq's count), or what it measures of the outcome (circuitBreaker).
 */
export function atEnd (ctx: Ctx, fn: (ctx: Ctx) => void): void {
  if (ctx.ends === null) ctx.ends = [fn]
  else ctx.ends.push(fn)
}

/**
 * Wraps the client side of this request in a response filter (core/worker/request/client-filter.ts):
 * it sees the answer of whatever follows this middleware in the chain (the service, a later
 * middleware, lb's own errors) before the client does. `f` is made once per instance, in create().
 */
export function addClientFilter (ctx: Ctx, f: FilterFactory): void {
  if (ctx.filters === null) ctx.filters = [f]
  else ctx.filters.push(f)
}

/** Adds flat [name, value, ...] pairs to the upstream request (names lower-case). */
export function addUpstreamHeaders (ctx: Ctx, pairs: readonly string[]): void {
  const cur = ctx.upstreamHeaders
  ctx.upstreamHeaders = cur === null ? pairs as string[] : cur.concat(pairs)
}

/** Stops request headers (lower-case names) from reaching the upstream. */
export function dropRequestHeaders (ctx: Ctx, names: readonly string[]): void {
  const cur = ctx.dropHeaders
  ctx.dropHeaders = cur === null ? names as string[] : cur.concat(names)
}

/** Adds flat [name, value, ...] pairs to the client response. */
export function addResponseHeaders (ctx: Ctx, pairs: readonly string[]): void {
  const cur = ctx.responseHeaders
  ctx.responseHeaders = cur === null ? pairs as string[] : cur.concat(pairs)
}

/** Index of the value of header `lower` (a lower-case name) in a flat list, or -1. */
export function findHeader (headers: readonly string[], lower: string): number {
  for (let i = 0; i < headers.length; i += 2) {
    const k = headers[i]!
    if (k.length === lower.length && (k === lower || k.toLowerCase() === lower)) return i + 1
  }
  return -1
}

/** Removes every header named `lower` (case-insensitive) from a flat list. */
export function removeHeader (headers: string[], lower: string): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    const k = headers[i]!
    if (k.length === lower.length && (k === lower || k.toLowerCase() === lower)) headers.splice(i, 2)
  }
}

/** Sets a header, replacing any of the same name. */
export function setHeader (headers: string[], lower: string, value: string): void {
  removeHeader(headers, lower)
  headers.push(lower, value)
}
