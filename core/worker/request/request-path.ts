// The request path, decided once before routing (DataPlane.handle, which every
// HTTP/1.1 request and WebSocket upgrade enters): routers, middlewares, the
// access log and the request forwarded upstream all see the path this returns,
// so a request cannot be routed as one path and served as another
// ("/x/../private/secret.txt" routed by a catch-all router, then served by a
// normalising backend as "/private/secret.txt" past the router's auth).
//
// Normalisation is RFC 3986 §6.2.2, as Traefik v3, nginx and Envoy do it:
//   - percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) are decoded,
//     every other escape is kept with upper-case hex digits (%2f → %2F);
//   - "." and ".." segments are removed (§5.2.4), after decoding, so "%2e%2e"
//     is a ".." too; a ".." that would climb above the root is refused;
//   - repeated slashes are merged unless the entry point says not to.
// Refused (400, the reason naming the character): the ambiguous escapes
// %2F %5C %00 %25 %3B %3F %23 (each allowed by its own entry point option;
// an allowed one is kept encoded, never decoded), malformed escapes, raw
// control characters, space, backslash, "#" and non-ASCII characters.
// The query is not this module's: it is forwarded byte for byte.
import { DEFAULTS } from '../../config/defaults.js'
import type { RequestPathConf } from '../../config/static.js'
import type { PathPolicy } from './path-policy.js'

const SLASH = 0x2f
const DOT = 0x2e
const PERCENT = 0x25
const BACKSLASH = 0x5c
const HASH = 0x23
const SEMICOLON = 0x3b

/** A path this module refused: `reason` goes into the 400 (LB_ERR_BAD_PATH). */
export class PathRefused {
  readonly reason: string
  constructor (reason: string) { this.reason = reason }
}

export type { PathPolicy } from './path-policy.js'

/** The ambiguous escapes, each with the EncodedCharactersConf field that allows it and how a message names it. */
const AMBIGUOUS = [
  [0x2f, 'slash', '"/"'],
  [0x5c, 'backSlash', 'backslash'],
  [0x00, 'nullCharacter', 'NUL'],
  [0x3b, 'semicolon', '";"'],
  [0x25, 'percent', '"%"'],
  [0x3f, 'questionMark', '"?"'],
  [0x23, 'hash', '"#"'],
] as const

export function compilePathPolicy (conf: RequestPathConf): PathPolicy {
  const refused = new Array<boolean>(256).fill(false)
  for (const [byte, field] of AMBIGUOUS) refused[byte] = !conf.allowEncoded[field]
  return Object.freeze({ mergeSlashes: conf.mergeSlashes, refused: Object.freeze(refused) })
}

/** The default policy: for a request on an entry point the current generation no longer has. */
export const DEFAULT_POLICY: PathPolicy = compilePathPolicy(DEFAULTS.requestPath)

/** p[j] ends a segment's name: the end, "/", or ";" (path parameters, which servlet containers strip before resolving dot segments). */
function nameEndsAt (p: string, j: number): boolean {
  return j === p.length || p.charCodeAt(j) === SLASH || p.charCodeAt(j) === SEMICOLON
}

/** p[i] (a ".") starts a "." or ".." segment, with or without ";" parameters ("..;x"). */
function dotSegmentAt (p: string, i: number): boolean {
  return nameEndsAt(p, i + 1) || (p.charCodeAt(i + 1) === DOT && nameEndsAt(p, i + 2))
}

/**
 * True when `p` is already normal: it starts with "/" and holds only printable
 * ASCII other than "%", "\" and "#", no "." or ".." segment, and no "//" when
 * slashes are merged. The common request takes only this scan: no allocation.
 */
export function isNormalPath (p: string, mergeSlashes: boolean): boolean {
  const n = p.length
  if (n === 0 || p.charCodeAt(0) !== SLASH) return false
  for (let i = 0; i < n; i++) {
    const c = p.charCodeAt(i)
    if (c <= 0x20 || c >= 0x7f || c === PERCENT || c === BACKSLASH || c === HASH) return false
    if (c === SLASH && i + 1 < n) {
      const d = p.charCodeAt(i + 1)
      if ((d === SLASH && mergeSlashes) || (d === DOT && dotSegmentAt(p, i + 1))) return false
    }
  }
  return true
}

function hexValue (c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30
  const l = c | 0x20 // ASCII letters to lower case
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1
}

/** RFC 3986 §2.3 unreserved: ALPHA DIGIT "-" "." "_" "~". */
function unreserved (b: number): boolean {
  const l = b | 0x20
  return (l >= 0x61 && l <= 0x7a) || (b >= 0x30 && b <= 0x39) || b === 0x2d || b === DOT || b === 0x5f || b === 0x7e
}

const HEX = '0123456789ABCDEF'

function byteName (c: number): string {
  return '0x' + HEX[c >> 4]! + HEX[c & 15]!
}

/** Why the raw character `c` (not "%") is refused in a path, or '' when it may stand. */
function rawProblem (c: number): string {
  if (c < 0x20 || c === 0x7f) return `control character ${byteName(c)}`
  if (c === 0x20) return 'space'
  if (c === BACKSLASH) return 'backslash ("\\")'
  if (c === HASH) return '"#" (a fragment is never sent to a server)'
  if (c > 0x7f) return `non-ASCII character U+${c.toString(16).toUpperCase().padStart(4, '0')} (send it percent-encoded)`
  return ''
}

/**
 * The normal form of a request path (without its query), or why it is refused.
 * Returns `p` itself when it is already normal (isNormalPath).
 */
export function normalizePath (p: string, policy: PathPolicy): string | PathRefused {
  const merge = policy.mergeSlashes
  if (isNormalPath(p, merge)) return p
  const n = p.length
  if (n === 0 || p.charCodeAt(0) !== SLASH) return new PathRefused('the path must start with "/"')
  // the segments after the leading "/"; "" is an empty segment (from "//", or a trailing "/" when last)
  const out: string[] = []
  let seg = ''
  for (let i = 1; i <= n; i++) {
    const c = i < n ? p.charCodeAt(i) : SLASH
    if (c === SLASH) {
      const last = i === n
      // "/a/..;/b": lb would route it as written, a servlet container (Tomcat, Jetty) serves "/b"
      if (seg.startsWith('.;') || seg.startsWith('..;')) return new PathRefused(`a dot segment with parameters ${JSON.stringify(seg)}`)
      if (seg === '..') {
        if (out.length === 0) return new PathRefused('".." above the root')
        out.pop()
        if (last) out.push('')
      } else if (seg === '.' || (seg === '' && merge)) {
        if (last) out.push('')
      } else out.push(seg)
      seg = ''
      continue
    }
    if (c === PERCENT) {
      const hi = i + 2 < n ? hexValue(p.charCodeAt(i + 1)) : -1
      const lo = hi >= 0 ? hexValue(p.charCodeAt(i + 2)) : -1
      if (lo < 0) return new PathRefused(`malformed percent-encoding ${JSON.stringify(p.slice(i, i + 3))}`)
      const b = hi * 16 + lo
      if (unreserved(b)) seg += String.fromCharCode(b)
      else if (policy.refused[b] === true) {
        const name = AMBIGUOUS.find((a) => a[0] === b)![2]
        return new PathRefused(`encoded ${name} (%${HEX[hi]!}${HEX[lo]!}) is not allowed`)
      } else seg += '%' + HEX[hi]! + HEX[lo]!
      i += 2
      continue
    }
    const why = rawProblem(c)
    if (why !== '') return new PathRefused(why)
    seg += p[i]!
  }
  return '/' + out.join('/')
}
