// Routers compiled per entry point: each rule (plain data from core/config/
// rule.ts, regexps already DFA tables) becomes a tree of closures once per
// configuration, and routes are tried highest priority first. A priority of 0
// means the rule's length, as Traefik (RouterConf.effectivePriority), so the
// more specific rule (PathPrefix(`/api/`) over PathPrefix(`/`)) wins without
// configuration. Traefik breaks ties between routers of one provider in no set
// order (Go's sort.Sort is not stable); lb breaks them by router name, so
// every worker and every reload route a request the same way.
//
// Matching allocates nothing: the closures read ctx's fields, scan its header
// list and its raw query in place, and run DFAs (rule-match.ts).
import type { RouterConf } from '../../config/dynamic.js'
import type { Rule } from '../../config/rules/rule.js'
import { compileCidrs } from '../../net/source.js'
import type { Ctx } from './context.js'
import { compareDecoded, queryHas, searchDecoded, searchRaw } from './rule-match.js'

export type Matcher = (ctx: Ctx) => boolean

/** Whether the path being routed holds a "%" (then path matchers read it decoded): -1 until a path matcher asks; reset by matchRoute. */
let pathEscaped = -1

function escaped (ctx: Ctx): boolean {
  if (pathEscaped < 0) pathEscaped = ctx.path.indexOf('%') < 0 ? 0 : 1
  return pathEscaped === 1
}

function hostMatcher (values: readonly string[]): Matcher {
  const exact = values.filter((v) => !v.startsWith('*'))
  const one = values.filter((v) => v.startsWith('*.')).map((v) => v.slice(1)) // ".example.com": exactly one label before
  const any = values.filter((v) => v.startsWith('**.')).map((v) => v.slice(2)) // ".example.com": one label or more before
  if (one.length === 0 && any.length === 0) {
    if (exact.length === 1) {
      const h = exact[0]!
      return (ctx) => ctx.host === h
    }
    return (ctx) => exact.includes(ctx.host)
  }
  return (ctx) => {
    const h = ctx.host
    if (exact.includes(h)) return true
    for (let i = 0; i < one.length; i++) {
      const s = one[i]!
      if (h.length > s.length && h.endsWith(s) && h.lastIndexOf('.', h.length - s.length - 1) < 0) return true
    }
    for (let i = 0; i < any.length; i++) if (h.length > any[i]!.length && h.endsWith(any[i]!)) return true
    return false
  }
}

function pathMatcher (values: readonly string[], prefix: boolean): Matcher {
  if (values.length === 1) {
    const v = values[0]!
    if (prefix) return (ctx) => escaped(ctx) ? compareDecoded(ctx.path, 0, ctx.path.length, v, false) !== 0 : ctx.path.startsWith(v)
    return (ctx) => escaped(ctx) ? compareDecoded(ctx.path, 0, ctx.path.length, v, false) === 1 : ctx.path === v
  }
  const ms = values.map((v) => pathMatcher([v], prefix))
  return (ctx) => {
    for (let i = 0; i < ms.length; i++) if (ms[i]!(ctx)) return true
    return false
  }
}

export function compileRule (r: Rule): Matcher {
  switch (r.op) {
    case 'host': return hostMatcher(r.values)
    case 'hostRegexp': {
      const re = r.re
      return (ctx) => searchRaw(re, ctx.host, 0, ctx.host.length)
    }
    case 'path': return pathMatcher(r.values, false)
    case 'pathPrefix': return pathMatcher(r.values, true)
    case 'pathRegexp': {
      const re = r.re
      return (ctx) => escaped(ctx) ? searchDecoded(re, ctx.path, 0, ctx.path.length, false) : searchRaw(re, ctx.path, 0, ctx.path.length)
    }
    case 'method': {
      const vs = r.values
      return vs.length === 1 ? (ctx) => ctx.method === vs[0] : (ctx) => vs.includes(ctx.method)
    }
    case 'header': {
      const { name, value } = r
      return (ctx) => {
        const h = ctx.headers
        for (let i = 0; i < h.length; i += 2) if (h[i] === name && h[i + 1] === value) return true
        return false
      }
    }
    case 'headerRegexp': {
      const { name, re } = r
      return (ctx) => {
        const h = ctx.headers
        for (let i = 0; i < h.length; i += 2) if (h[i] === name && searchRaw(re, h[i + 1]!, 0, h[i + 1]!.length)) return true
        return false
      }
    }
    case 'query': {
      const { key, value } = r
      return (ctx) => ctx.query !== '' && queryHas(ctx.query, key, value, null)
    }
    case 'queryRegexp': {
      const { key, re } = r
      return (ctx) => ctx.query !== '' && queryHas(ctx.query, key, '', re)
    }
    case 'clientIP': {
      const allowed = compileCidrs(r.cidrs) // the one address matcher (core/net/ip.ts), on the peer address as Traefik
      return (ctx) => allowed(ctx.remoteAddress)
    }
    case 'not': {
      const m = compileRule(r.rule)
      return (ctx) => !m(ctx)
    }
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
  }
}

export interface CompiledRoute<T> {
  readonly router: RouterConf
  readonly match: Matcher
  readonly priority: number
  /** what the data plane attaches to the route (service, middleware chain) */
  readonly target: T
}

/** Routes of one entry point, highest priority first; ties in the order of router names. */
export function compileRoutes<T> (routers: readonly RouterConf[], entrypoint: string, target: (r: RouterConf) => T): CompiledRoute<T>[] {
  return routers
    .filter((r) => r.entrypoints.includes(entrypoint))
    .map((r) => ({ router: r, match: compileRule(r.ast), priority: r.effectivePriority, target: target(r) }))
    .sort((a, b) => b.priority - a.priority || (a.router.name < b.router.name ? -1 : 1))
}

export function matchRoute<T> (routes: readonly CompiledRoute<T>[], ctx: Ctx): CompiledRoute<T> | null {
  pathEscaped = -1
  for (let i = 0; i < routes.length; i++) if (routes[i]!.match(ctx)) return routes[i]!
  return null
}
