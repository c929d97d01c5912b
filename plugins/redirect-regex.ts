// redirectRegex: as Traefik's, the request's URL (scheme://host[:port]/path?query)
// is matched against `regex`; when it matches, the client is redirected to that
// URL with every match replaced by `replacement` (Go's template: $1, ${name}).
// permanent → 301 (308 for methods other than GET/HEAD), else 302 (307), as
// redirectScheme. Linear-time patterns (regex-option.ts).
import { type Checker, type Table, HANDLED, NEXT, definePlugin, join, replaceAllGo } from 'lb/plugin'
import { checkRegexOption, compiled } from './regex-option.js'

export interface RedirectRegexConf {
  readonly regex: string
  readonly replacement: string
  readonly permanent: boolean
}

function validate (c: Checker, t: Table, path: string): RedirectRegexConf {
  c.table(t, path, ['regex', 'replacement', 'permanent'])
  const regex = c.string(t, 'regex', path)
  if (typeof t.regex === 'string') checkRegexOption(c, regex, join(path, 'regex'))
  const replacement = c.string(t, 'replacement', path)
  if (/[\r\n]/.test(replacement)) c.problem(join(path, 'replacement'), 'a URL template without line breaks', replacement)
  return { regex, replacement, permanent: c.bool(t, 'permanent', path, false) }
}

export default definePlugin<RedirectRegexConf>({
  name: 'redirectRegex',
  api: 1,
  validate,
  create (conf) {
    const test = compiled(conf.regex)
    const all = compiled(conf.regex, true)
    const [safe, other] = conf.permanent ? [301, 308] : [302, 307]
    return {
      onRequest (ctx) {
        const url = `${ctx.proto}://${ctx.header('host')}${ctx.path}${ctx.query === '' ? '' : '?' + ctx.query}`
        if (!test.test(url)) return NEXT
        ctx.reply = {
          status: ctx.method === 'GET' || ctx.method === 'HEAD' ? safe! : other!,
          headers: ['location', replaceAllGo(all, url, conf.replacement)],
          body: '',
        }
        return HANDLED
      },
    }
  },
})
