// Routers compiled per entry point: each rule tree becomes one closure at load
// time, and routes are tried in priority order (highest first). A priority of
// 0 means "the length of the rule", as Traefik, so the more specific rule
// (PathPrefix(`/api/`) over PathPrefix(`/`)) wins without configuration.
import type { RouterConf } from '../config/dynamic.js'
import type { Rule } from '../config/rule.js'
import type { Ctx } from './context.js'

export type Matcher = (ctx: Ctx) => boolean

export function compileRule (r: Rule): Matcher {
  switch (r.op) {
    case 'host': {
      const [one, ...more] = r.values
      return more.length === 0 ? (ctx) => ctx.host === one : (ctx) => r.values.includes(ctx.host)
    }
    case 'pathPrefix': {
      const [one, ...more] = r.values
      return more.length === 0 ? (ctx) => ctx.path.startsWith(one!) : (ctx) => r.values.some((v) => ctx.path.startsWith(v))
    }
    case 'path': return (ctx) => r.values.includes(ctx.path)
    case 'and': {
      const a = compileRule(r.left)
      const b = compileRule(r.right)
      return (ctx) => a(ctx) && b(ctx)
    }
    case 'or': {
      const a = compileRule(r.left)
      const b = compileRule(r.right)
      return (ctx) => a(ctx) || b(ctx)
    }
    default: {
      const never: never = r
      throw new Error(`unknown rule ${JSON.stringify(never)}`)
    }
  }
}

export interface CompiledRoute<T> {
  readonly router: RouterConf
  readonly match: Matcher
  readonly priority: number
  /** what the data plane attaches to the route (service, middleware chain) */
  readonly target: T
}

export function effectivePriority (r: RouterConf): number {
  return r.priority !== 0 ? r.priority : r.rule.length
}

/** Routes of one entry point, highest priority first; ties keep the order of names for determinism. */
export function compileRoutes<T> (routers: readonly RouterConf[], entrypoint: string, target: (r: RouterConf) => T): CompiledRoute<T>[] {
  return routers
    .filter((r) => r.entrypoints.includes(entrypoint))
    .map((r) => ({ router: r, match: compileRule(r.ast), priority: effectivePriority(r), target: target(r) }))
    .sort((a, b) => b.priority - a.priority || (a.router.name < b.router.name ? -1 : 1))
}

export function matchRoute<T> (routes: readonly CompiledRoute<T>[], ctx: Ctx): CompiledRoute<T> | null {
  for (let i = 0; i < routes.length; i++) if (routes[i]!.match(ctx)) return routes[i]!
  return null
}
