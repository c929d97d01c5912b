// replacePathRegex: as Traefik's, when `regex` matches the path, every match
// is replaced by `replacement` (Go's template: $1, ${1}, ${name}); the path the
// client sent goes upstream in X-Replaced-Path (a client's own is dropped).
// Linear-time patterns (regex-option.ts); the new path is normalised like a
// client's (rewritePath), so a replacement cannot smuggle "..", "%2F" or a
// query past the entry point's path rules. The query is kept.
import { type Checker, type Table, NEXT, addUpstreamHeaders, definePlugin, dropRequestHeaders, join, replaceAllGo, rewritePath } from 'lb/plugin'
import { checkRegexOption, compiled } from './regex-option.js'

export interface ReplacePathRegexConf {
  readonly regex: string
  readonly replacement: string
}

const DROP = Object.freeze(['x-replaced-path'])

function validate (c: Checker, t: Table, path: string): ReplacePathRegexConf {
  c.table(t, path, ['regex', 'replacement'])
  const regex = c.string(t, 'regex', path)
  if (typeof t.regex === 'string') checkRegexOption(c, regex, join(path, 'regex'))
  const replacement = c.string(t, 'replacement', path)
  if (typeof t.replacement === 'string' && replacement === '') c.problem(join(path, 'replacement'), 'a replacement path (Traefik skips an empty one)', replacement)
  return { regex, replacement }
}

export default definePlugin<ReplacePathRegexConf>({
  name: 'replacePathRegex',
  api: 1,
  validate,
  create (conf) {
    const test = compiled(conf.regex)
    const all = compiled(conf.regex, true)
    return {
      onRequest (ctx) {
        const p = ctx.path
        if (!test.test(p)) return NEXT
        dropRequestHeaders(ctx, DROP)
        addUpstreamHeaders(ctx, ['x-replaced-path', p])
        const next = replaceAllGo(all, p, conf.replacement)
        // a "?" or "#" the replacement brought is part of the path (as in Traefik), encoded as a client would
        return rewritePath(ctx, next.replaceAll('?', '%3F').replaceAll('#', '%23'))
      },
    }
  },
})
