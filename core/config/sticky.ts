// [services.X.sticky.cookie]: session affinity by a cookie lb sets, as
// Traefik's `sticky.cookie` (HAProxy `cookie NAME insert`). The cookie names a
// server of the service by an opaque value derived from the service and the
// server (core/upstream/sticky.ts): every worker, every node and every restart
// map it to the same server, so no table is shared and none is lost.
import { createHash } from 'node:crypto'
import { type Checker, join } from './check.js'

export const SAME_SITE = ['', 'none', 'lax', 'strict'] as const

export interface StickyCookieConf {
  readonly name: string
  readonly secure: boolean
  readonly httpOnly: boolean
  /** '' = no SameSite attribute */
  readonly sameSite: typeof SAME_SITE[number]
  /** seconds; 0 = a session cookie (no Max-Age) */
  readonly maxAge: number
  readonly path: string
  /** '' = no Domain attribute (the host that answered) */
  readonly domain: string
}

// RFC 6265 cookie-name (a token) and the attribute values lb writes verbatim
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const ATTR = /^[\x21-\x3a\x3c-\x7e]*$/ // printable, no ';'

/** Traefik's default name: "_" and the first 5 hex digits of SHA-1 of the service name. */
export const defaultCookieName = (service: string): string => '_' + createHash('sha1').update(service).digest('hex').slice(0, 5)

export function checkSticky (c: Checker, raw: unknown, p: string, service: string): StickyCookieConf | null {
  if (raw === undefined) return null
  const t = c.table(raw, p, ['cookie'])
  const cp = join(p, 'cookie')
  if (t.cookie === undefined) {
    c.problems.push(`${cp}: required in ${p} (the only kind of stickiness lb has)`)
    return null
  }
  const k = c.table(t.cookie, cp, ['name', 'secure', 'http_only', 'same_site', 'max_age', 'path', 'domain'])
  const name = c.string(k, 'name', cp, defaultCookieName(service))
  if (!TOKEN.test(name)) c.problem(join(cp, 'name'), 'a cookie name (letters, digits and !#$%&\'*+.^_`|~-)', name)
  const path = c.string(k, 'path', cp, '/')
  if (!path.startsWith('/') || !ATTR.test(path)) c.problem(join(cp, 'path'), 'a path starting with "/", printable, without ";"', path)
  const domain = c.string(k, 'domain', cp, '')
  if (!ATTR.test(domain)) c.problem(join(cp, 'domain'), 'a domain, printable, without ";"', domain)
  const sameSite = c.oneOf(k, 'same_site', cp, SAME_SITE, '')
  const secure = c.bool(k, 'secure', cp, false)
  if (sameSite === 'none' && !secure) c.problems.push(`${join(cp, 'same_site')}: "none" needs secure = true (browsers drop such a cookie)`)
  return {
    name,
    secure,
    httpOnly: c.bool(k, 'http_only', cp, false),
    sameSite,
    maxAge: c.int(k, 'max_age', cp, 0, 0, 400 * 86_400), // RFC 6265bis caps Max-Age at 400 days
    path,
    domain,
  }
}
