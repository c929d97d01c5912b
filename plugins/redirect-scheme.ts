// redirectScheme: send requests that arrived over another scheme to `scheme`
// (default https), keeping host, path and query, as Traefik's redirectScheme.
// permanent = true → 301, or 308 for methods other than GET/HEAD (which must
// keep their method and body); otherwise 302, or 307.
import { type Checker, type Reply, type Table, HANDLED, NEXT, definePlugin, formatError } from 'lb/plugin'

export const SCHEMES = ['https', 'http'] as const

export interface RedirectSchemeConf {
  readonly scheme: typeof SCHEMES[number]
  /** port in the Location; 0 = none (the scheme's default). Default: 0 */
  readonly port: number
  readonly permanent: boolean
}

function validate (c: Checker, t: Table, path: string): RedirectSchemeConf {
  c.table(t, path, ['scheme', 'port', 'permanent'])
  return {
    scheme: c.oneOf(t, 'scheme', path, SCHEMES, 'https'),
    port: c.int(t, 'port', path, 0, 0, 65535),
    permanent: c.bool(t, 'permanent', path, false),
  }
}

const NO_HOST: Reply = Object.freeze({
  status: 400,
  headers: Object.freeze(['content-type', 'text/plain']) as string[],
  body: formatError('LB_ERR_BAD_REQUEST', { reason: 'no Host header to redirect to' }) + '\n',
}) as Reply

export default definePlugin<RedirectSchemeConf>({
  name: 'redirectScheme',
  api: 1,
  validate,
  create (conf) {
    const prefix = conf.scheme + '://'
    const defaultPort = conf.scheme === 'https' ? 443 : 80
    const port = conf.port === 0 || conf.port === defaultPort ? '' : ':' + conf.port
    const [safe, other] = conf.permanent ? [301, 308] : [302, 307]
    return {
      onRequest (ctx) {
        if (ctx.proto === conf.scheme) return NEXT
        // ctx.host is the Host header without its port (a bracketed IPv6 literal stays bracketed)
        if (ctx.host === '') {
          ctx.reply = NO_HOST
          return HANDLED
        }
        ctx.reply = {
          status: ctx.method === 'GET' || ctx.method === 'HEAD' ? safe! : other!,
          headers: ['location', prefix + ctx.host + port + ctx.path + (ctx.query === '' ? '' : '?' + ctx.query)],
          body: '',
        }
        return HANDLED
      },
    }
  },
})
