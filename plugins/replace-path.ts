// replacePath: replaces the whole path with `path`, as Traefik's replacePath;
// the path the client sent goes upstream in X-Replaced-Path (a client's own
// X-Replaced-Path is dropped: the backend trusts it to be lb's). The query is
// kept. `path` is checked at load and normalised once per request like any
// rewrite (rewritePath: a path already normal costs one scan).
import { type Checker, type Table, addUpstreamHeaders, definePlugin, dropRequestHeaders, rewritePath } from 'lb/plugin'
import { checkPathOption } from './path-option.js'

export interface ReplacePathConf {
  readonly path: string
}

const DROP = Object.freeze(['x-replaced-path'])

function validate (c: Checker, t: Table, path: string): ReplacePathConf {
  c.table(t, path, ['path'])
  const p = c.string(t, 'path', path)
  if (typeof t.path === 'string') checkPathOption(c, p, `${path}.path`, 'a path')
  return { path: p }
}

export default definePlugin<ReplacePathConf>({
  name: 'replacePath',
  api: 1,
  validate,
  create (conf) {
    const target = conf.path
    return {
      onRequest (ctx) {
        dropRequestHeaders(ctx, DROP)
        addUpstreamHeaders(ctx, ['x-replaced-path', ctx.path])
        return rewritePath(ctx, target)
      },
    }
  },
})
