// The values of a rule's matchers, checked at load (rule.ts): what Traefik v3
// refuses, and what could never match in lb because request paths and hosts
// are normalised before routing (core/worker/request/request-path.ts, request-host.ts).
import { isIPv6 } from 'node:net'
import { parseCidr } from '../../net/ip.js'
import { HEADER_NAME } from '../check.js'

/** A bad value: `arg` is its index among the matcher's values, `offset` the code unit in it where the fault is. */
export class ValueError extends Error {
  readonly arg: number
  readonly offset: number
  constructor (message: string, arg: number, offset = 0) {
    super(message)
    this.arg = arg
    this.offset = offset
  }
}

/** Traefik v2's `{name}` or `{name:regexp}` variable in a host or path value (v3 takes the regexp itself) */
const V2_VARIABLE = /\{([A-Za-z_][A-Za-z0-9_]*)(?::((?:[^{}]|\{[^{}]*\})*))?\}/

/** A value with Traefik v2 variables turned into the v3 regexp: "{sub:[a-z]+}.example.com" → "^[a-z]+\.example\.com$". */
function v3Form (v: string, kind: 'host' | 'path'): string {
  let out = ''
  let last = 0
  for (const m of v.matchAll(new RegExp(V2_VARIABLE, 'g'))) {
    out += v.slice(last, m.index).replace(/[.*+?^$()[\]{}|\\]/g, '\\$&')
    out += m[2] ?? (kind === 'host' ? '[^.]+' : '[^/]+')
    last = m.index + m[0].length
  }
  return `^${out}${v.slice(last).replace(/[.*+?^$()[\]{}|\\]/g, '\\$&')}$`
}

function refuseV2 (v: string, arg: number, kind: 'host' | 'path', matcher: string): void {
  const m = V2_VARIABLE.exec(v)
  if (m === null) return
  throw new ValueError(`${m[0]} is Traefik v2 syntax; Traefik v3 takes the regexp itself: ${matcher}(\`${v3Form(v, kind)}\`)`, arg, m.index)
}

function firstNonAscii (v: string): number {
  for (let i = 0; i < v.length; i++) if (v.charCodeAt(i) > 0x7e || v.charCodeAt(i) < 0x20) return i
  return -1
}

/** A Host() value: lower case, without the trailing dot; "*.x" / "**.x" wildcards; "[::1]" for an IPv6 literal. */
export function checkHostValue (h: string, arg: number): string {
  if (h === '') throw new ValueError('expected a host name, found an empty value', arg)
  const bad = firstNonAscii(h)
  if (bad >= 0) throw new ValueError('non-ASCII characters are not allowed: write the name in punycode (xn--...)', arg, bad)
  refuseV2(h, arg, 'host', 'HostRegexp')
  if (isIPv6(h)) return `[${h.toLowerCase()}]` // as the request's Host carries it (request-host.ts)
  if (isIPv6(h.replace(/^\[|\]$/g, ''))) return h.toLowerCase()
  const other = /[\s/?#@%:\\]/.exec(h)
  if (other !== null) {
    const what = other[0] === ':' ? 'a port (Host matches the name without its port)' : JSON.stringify(other[0])
    throw new ValueError(`expected a host name, found ${what}`, arg, other.index)
  }
  const name = h.toLowerCase().replace(/\.$/, '')
  const star = name.indexOf('*')
  if (star >= 0) {
    const wild = name.startsWith('**.') ? 3 : name.startsWith('*.') ? 2 : -1
    if (wild < 0 || name.indexOf('*', wild) >= 0 || name.length === wild) {
      throw new ValueError('a wildcard is only "*." (one label) or "**." (any number of labels) before a name, as in *.example.com', arg, star)
    }
  }
  return name
}

/** A regexp of HostRegexp or PathRegexp: refuses Traefik v2 variables, saying the v3 form. */
export function checkRegexpValue (v: string, arg: number, kind: 'host' | 'path'): string {
  if (kind === 'host') {
    const bad = firstNonAscii(v)
    if (bad >= 0) throw new ValueError('non-ASCII characters are not allowed: write the name in punycode (xn--...)', arg, bad)
  }
  refuseV2(v, arg, kind, kind === 'host' ? 'HostRegexp' : 'PathRegexp')
  return v
}

const HEX = /^[0-9A-Fa-f]{2}$/
/** RFC 3986 unreserved: decoded before routing, so "%41" in a rule could never match */
const UNRESERVED = /[A-Za-z0-9\-._~]/

/**
 * A Path() or PathPrefix() value. It is compared with the path routing sees
 * (core/worker/request/rule-match.ts): lb's normalised path with the escapes that are
 * not reserved characters decoded, as Traefik's routing path. Percent escapes
 * in the value get upper-case hex (lb's normal form); a value that could never
 * match a normalised path is refused.
 */
export function checkPathValue (p: string, arg: number): string {
  if (!p.startsWith('/')) throw new ValueError('must start with "/"', arg)
  refuseV2(p, arg, 'path', 'PathRegexp')
  let out = ''
  for (let i = 0; i < p.length; i++) {
    if (p[i] !== '%') { out += p[i]; continue }
    const hex = p.slice(i + 1, i + 3)
    if (!HEX.test(hex)) throw new ValueError(`malformed percent-encoding ${JSON.stringify(p.slice(i, i + 3))}`, arg, i)
    const ch = String.fromCharCode(parseInt(hex, 16))
    if (UNRESERVED.test(ch)) throw new ValueError(`never matches: %${hex} is decoded to ${JSON.stringify(ch)} before routing, write ${JSON.stringify(ch)}`, arg, i)
    out += '%' + hex.toUpperCase()
    i += 2
  }
  const segs = out.split('/')
  const dot = segs.findIndex((s, n) => n > 0 && (s === '.' || s === '..'))
  if (dot >= 0) throw new ValueError(`never matches: request paths have their "${segs[dot]}" segments resolved before routing`, arg, segs.slice(0, dot).join('/').length + 1)
  return out
}

/** A Header() name: a token, compared in lower case as ctx.headers' names are. */
export function checkHeaderName (name: string): string {
  if (!HEADER_NAME.test(name)) throw new ValueError('expected a header name (letters, digits and !#$%&\'*+-.^_`|~)', 0)
  return name.toLowerCase()
}

/** A ClientIP() value: an IPv4 or IPv6 address, or a CIDR. */
export function checkClientIp (v: string, arg: number): string {
  if (parseCidr(v) === null) throw new ValueError('expected an IPv4 or IPv6 address or CIDR, such as 192.168.1.0/24 or fe80::/10', arg)
  return v
}
