// addPrefix: puts `prefix` before the path, as Traefik's addPrefix ("/api" +
// "/users" → "/api/users"). The result is normalised like a client's path
// (rewritePath): a prefix ending in "/" before a path gives "//", merged when
// the entry point merges slashes.
import { type Checker, type Table, definePlugin, rewritePath } from 'lb/plugin'
import { checkPathOption } from './path-option.js'

export interface AddPrefixConf {
  readonly prefix: string
}

function validate (c: Checker, t: Table, path: string): AddPrefixConf {
  c.table(t, path, ['prefix'])
  const prefix = c.string(t, 'prefix', path)
  if (typeof t.prefix === 'string') checkPathOption(c, prefix, `${path}.prefix`, 'a path prefix')
  return { prefix }
}

export default definePlugin<AddPrefixConf>({
  name: 'addPrefix',
  api: 1,
  validate,
  create (conf) {
    const prefix = conf.prefix
    return { onRequest: (ctx) => rewritePath(ctx, prefix + ctx.path) }
  },
})
