// stripPrefixRegex: as Traefik's, the first of `regex` whose match (anywhere)
// is a prefix of the path has that prefix removed; the rest keeps (or gets) its
// leading "/", the prefix goes upstream in X-Forwarded-Prefix (a client's own
// is dropped). Patterns run on a linear-time engine (regex-option.ts); the
// new path is normalised like a client's (rewritePath).
import { type Checker, type Table, NEXT, addUpstreamHeaders, definePlugin, dropRequestHeaders, join, rewritePath } from 'lb/plugin'
import { checkRegexOption, compiled } from './regex-option.js'

export interface StripPrefixRegexConf {
  readonly regex: readonly string[]
}

const DROP = Object.freeze(['x-forwarded-prefix'])

function validate (c: Checker, t: Table, path: string): StripPrefixRegexConf {
  c.table(t, path, ['regex'])
  const regex = c.strings(t, 'regex', path, [])
  if (regex.length === 0) c.problem(join(path, 'regex'), 'at least one regular expression', t.regex)
  regex.forEach((r, i) => checkRegexOption(c, r, `${join(path, 'regex')}[${i}]`))
  return { regex }
}

export default definePlugin<StripPrefixRegexConf>({
  name: 'stripPrefixRegex',
  api: 1,
  validate,
  create (conf) {
    const res = conf.regex.map((r) => compiled(r))
    return {
      onRequest (ctx) {
        const p = ctx.path
        for (const re of res) {
          const m = re.exec(p)
          if (m === null || m[0] === '' || !p.startsWith(m[0])) continue
          dropRequestHeaders(ctx, DROP)
          addUpstreamHeaders(ctx, ['x-forwarded-prefix', m[0]])
          const rest = p.slice(m[0].length)
          return rewritePath(ctx, rest.charCodeAt(0) === 0x2f ? rest : '/' + rest)
        }
        return NEXT
      },
    }
  },
})
