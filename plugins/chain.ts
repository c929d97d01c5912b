// chain: a named list of middlewares, as Traefik's chain (`middlewares =
// ["auth", "limit"]`), so that routers share one list. The list is expanded
// into each router's chain when the config is checked (core/config/
// middleware-chain.ts): a request never meets this middleware, which adds no
// hook and no cost; each middleware it names runs as if the router named it.
import { type Checker, type Table, definePlugin, join } from 'lb/plugin'

export interface ChainConf {
  /** middleware names, run in this order; chains may name chains */
  readonly middlewares: readonly string[]
}

function validate (c: Checker, t: Table, path: string): ChainConf {
  c.table(t, path, ['middlewares'])
  const middlewares = c.strings(t, 'middlewares', path, [])
  if (middlewares.length === 0) c.problem(join(path, 'middlewares'), 'a list of at least one middleware name', t.middlewares)
  return { middlewares }
}

export default definePlugin<ChainConf>({
  name: 'chain',
  api: 1,
  validate,
  create: () => ({}),
})
