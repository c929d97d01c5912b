// The middleware plugin contract. A plugin is one module exporting one
// definition: a name, a config validator and a factory of hooks. `create` runs
// once per middleware instance per config generation in every worker; its
// hooks run per request, compiled into each route's chain at load time.
import type { Checker, Table } from './config/check.js'
import type { Logger } from './log.js'
import type { Shm } from './shm/layout.js'
import type { Ctx } from './worker/context.js'

export const NEXT = 0
export const HANDLED = 1
export type Verdict = typeof NEXT | typeof HANDLED

/** What a response hook may change before the head goes to the client. */
export interface ResponseHead {
  status: number
  /** flat [name, value, ...] as they will be sent; hooks may push or edit */
  headers: string[]
}

export interface Hooks {
  /** NEXT to continue, HANDLED after setting ctx.reply. A Promise only when it must await. */
  onRequest?: (ctx: Ctx) => Verdict | Promise<Verdict>
  /** called once with the response head, before it is sent */
  onResponse?: (ctx: Ctx, head: ResponseHead) => void
}

export interface PluginEnv {
  readonly log: Logger
  readonly shm: Shm
  /** name of the middleware instance */
  readonly name: string
}

export interface PluginDef<C = unknown> {
  readonly name: string
  /** Validates the middleware's table (without `type`); records problems on `c`. */
  validate (c: Checker, t: Table, path: string, baseDir: string): C
  create (conf: C, env: PluginEnv): Hooks
}

export function definePlugin<C> (def: PluginDef<C>): PluginDef<C> {
  return def
}
