// stripPrefix: removes the first of `prefixes` the path starts with, as
// Traefik's stripPrefix: a plain string prefix, not a segment ("/app" strips
// "/appx" to "/x", as Traefik does), the rest keeps (or gets) its leading "/",
// and the stripped prefix goes upstream in X-Forwarded-Prefix so the backend
// can build its links. A client's own X-Forwarded-Prefix is dropped: the
// backend trusts that header to be lb's. Routing happened before (the router
// matched the unstripped path); the stripped path is normalised like a
// client's (rewritePath), so "/app/..%2F" cannot become a way round it.
import { type Checker, type Table, NEXT, addUpstreamHeaders, definePlugin, dropRequestHeaders, join, rewritePath } from 'lb/plugin'
import { checkPathOption } from './path-option.js'

export interface StripPrefixConf {
  /** tried in order; the first the path starts with is stripped */
  readonly prefixes: readonly string[]
}

const DROP = Object.freeze(['x-forwarded-prefix'])

function validate (c: Checker, t: Table, path: string): StripPrefixConf {
  c.table(t, path, ['prefixes'])
  const prefixes = c.strings(t, 'prefixes', path, [])
  if (t.prefixes !== undefined && prefixes.length === 0) c.problem(join(path, 'prefixes'), 'at least one prefix', [])
  prefixes.forEach((p, i) => checkPathOption(c, p, `${join(path, 'prefixes')}[${i}]`, 'a path prefix'))
  return { prefixes }
}

export default definePlugin<StripPrefixConf>({
  name: 'stripPrefix',
  api: 1,
  validate,
  create (conf) {
    // the upstream header per prefix, rendered once: no allocation per request
    const headers = conf.prefixes.map((p) => Object.freeze(['x-forwarded-prefix', p]))
    return {
      onRequest (ctx) {
        const prefixes = conf.prefixes
        for (let i = 0; i < prefixes.length; i++) {
          const p = prefixes[i]!
          if (!ctx.path.startsWith(p)) continue
          dropRequestHeaders(ctx, DROP)
          addUpstreamHeaders(ctx, headers[i]!)
          const rest = ctx.path.slice(p.length)
          return rewritePath(ctx, rest.charCodeAt(0) === 0x2f ? rest : '/' + rest)
        }
        return NEXT
      },
    }
  },
})
