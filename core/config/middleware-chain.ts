// Expands chain middlewares (plugins/chain.ts) into the middlewares they name,
// once per config: the list each router runs is flat, so the request path
// never meets a chain. A chain that names itself, directly or through another
// chain, or names a middleware that does not exist, is a config problem.
import { type Checker, join } from './check.js'

/** A middleware as configured (dynamic.ts MiddlewareConf): a chain's conf holds the names it runs. */
interface Named {
  readonly name: string
  readonly type: string
  readonly conf: unknown
}

/** By middleware name, the middlewares it stands for, in order: itself, or for a chain what it expands to. */
export function expandChains (c: Checker, middlewares: readonly Named[]): ReadonlyMap<string, readonly string[]> {
  const byName = new Map(middlewares.map((m) => [m.name, m]))
  const out = new Map<string, readonly string[]>()
  const expand = (m: Named, path: readonly string[]): readonly string[] => {
    const done = out.get(m.name)
    if (done !== undefined) return done
    const names = m.type === 'chain' ? (m.conf as { middlewares?: readonly string[] } | null)?.middlewares : undefined
    if (names === undefined) {
      out.set(m.name, [m.name])
      return [m.name]
    }
    const flat: string[] = []
    const at = join(join('middlewares', m.name), 'middlewares')
    for (const name of names) {
      const inner = byName.get(name)
      if (inner === undefined) c.problems.push(`${at}: unknown middleware ${JSON.stringify(name)}`)
      else if (path.includes(name) || name === m.name) c.problems.push(`${at}: a chain cannot contain itself (${[...path, m.name, name].join(' → ')})`)
      else flat.push(...expand(inner, [...path, m.name]))
    }
    out.set(m.name, flat)
    return flat
  }
  for (const m of middlewares) expand(m, [])
  return out
}
