// headers: security headers and custom request/response headers, as Traefik's
// headers middleware. Everything is rendered in create(): a request costs two
// slot assignments, a response one pass over the configured names.
//
//   frame_deny = true            X-Frame-Options: DENY (custom_frame_options_value overrides the value)
//   content_type_nosniff = true  X-Content-Type-Options: nosniff
//   browser_xss_filter = true    X-XSS-Protection: 1; mode=block
//   sts_seconds (+ sts_include_subdomains, sts_preload)   Strict-Transport-Security
//   referrer_policy, content_security_policy, permissions_policy
//   [request_headers] / [response_headers]  name = "value" sets (replacing), name = "" removes
import { type Checker, type Table, HEADER_NAME, NEXT, addUpstreamHeaders, definePlugin, dropRequestHeaders, join, removeHeader } from 'lb/plugin'

export interface HeadersConf {
  /** flat [name, value, ...], lower-case names: set on the upstream request (replacing the client's) */
  readonly requestSet: readonly string[]
  /** lower-case names removed from the upstream request (set ones included: they replace) */
  readonly requestDrop: readonly string[]
  /** flat [name, value, ...]: set on the response, replacing the upstream's */
  readonly responseSet: readonly string[]
  /** lower-case names removed from the response (set ones included) */
  readonly responseDrop: readonly string[]
}

// the proxy owns these: framing, routing and the forwarding headers it writes itself
const RESERVED_REQUEST = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer',
  'proxy-connection', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-proto'])
const RESERVED_RESPONSE = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'trailer'])

function checkHeaderTable (c: Checker, t: Table, key: string, path: string, reserved: Set<string>): Array<[string, string]> {
  const p = join(path, key)
  const tab = c.table(t[key], p, null)
  const out: Array<[string, string]> = []
  for (const [name, v] of Object.entries(tab)) {
    const lower = name.toLowerCase()
    if (!HEADER_NAME.test(name)) c.problem(join(p, name), 'a header name (letters, digits and !#$%&\'*+.^_`|~-)', name)
    else if (reserved.has(lower)) c.problems.push(`${join(p, name)}: ${name} is managed by the proxy and cannot be set here`)
    if (typeof v !== 'string') c.problem(join(p, name), 'a string (empty removes the header)', v)
    else if (/[\r\n\0]/.test(v)) c.problem(join(p, name), 'a value without CR, LF or NUL', v)
    else out.push([lower, v])
  }
  return out
}

function validate (c: Checker, t: Table, path: string): HeadersConf {
  c.table(t, path, ['frame_deny', 'custom_frame_options_value', 'content_type_nosniff', 'browser_xss_filter', 'sts_seconds',
    'sts_include_subdomains', 'sts_preload', 'referrer_policy', 'content_security_policy', 'permissions_policy',
    'request_headers', 'response_headers'])
  const res: Array<[string, string]> = []
  const frame = c.string(t, 'custom_frame_options_value', path, '')
  if (c.bool(t, 'frame_deny', path, false) || frame !== '') res.push(['x-frame-options', frame === '' ? 'DENY' : frame])
  if (c.bool(t, 'content_type_nosniff', path, false)) res.push(['x-content-type-options', 'nosniff'])
  if (c.bool(t, 'browser_xss_filter', path, false)) res.push(['x-xss-protection', '1; mode=block'])
  const sts = c.int(t, 'sts_seconds', path, 0, 0, 2 ** 31 - 1)
  const subdomains = c.bool(t, 'sts_include_subdomains', path, false)
  const preload = c.bool(t, 'sts_preload', path, false)
  if (sts > 0) res.push(['strict-transport-security', `max-age=${sts}${subdomains ? '; includeSubDomains' : ''}${preload ? '; preload' : ''}`])
  else if (subdomains || preload) c.problems.push(`${path}: sts_include_subdomains and sts_preload need sts_seconds > 0`)
  for (const [key, name] of [['referrer_policy', 'referrer-policy'], ['content_security_policy', 'content-security-policy'],
    ['permissions_policy', 'permissions-policy']] as const) {
    const v = c.string(t, key, path, '')
    if (/[\r\n\0]/.test(v)) c.problem(join(path, key), 'a value without CR, LF or NUL', v)
    else if (v !== '') res.push([name, v])
  }
  // custom response headers come last: they override the security ones of the same name
  for (const h of checkHeaderTable(c, t, 'response_headers', path, RESERVED_RESPONSE)) {
    const i = res.findIndex(([n]) => n === h[0])
    if (i >= 0) res.splice(i, 1)
    res.push(h)
  }
  const req = checkHeaderTable(c, t, 'request_headers', path, RESERVED_REQUEST)
  const set = (list: Array<[string, string]>): string[] => list.filter(([, v]) => v !== '').flat()
  return {
    requestSet: set(req),
    requestDrop: req.map(([n]) => n),
    responseSet: set(res),
    responseDrop: res.map(([n]) => n),
  }
}

export default definePlugin<HeadersConf>({
  name: 'headers',
  api: 1,
  validate,
  create (conf) {
    const { requestSet, requestDrop, responseSet, responseDrop } = conf
    return {
      onRequest: requestDrop.length === 0
        ? undefined
        : (ctx) => {
            dropRequestHeaders(ctx, requestDrop)
            if (requestSet.length > 0) addUpstreamHeaders(ctx, requestSet)
            return NEXT
          },
      onResponse: responseDrop.length === 0
        ? undefined
        : (_ctx, head) => {
            const h = head.headers
            for (let i = 0; i < responseDrop.length; i++) removeHeader(h, responseDrop[i]!)
            for (let i = 0; i < responseSet.length; i++) h.push(responseSet[i]!)
          },
    }
  },
})
