// The Host of a request, checked once before routing (DataPlane.handle). RFC
// 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host,
// with more than one (request-check.ts refuses that), or with an invalid value. A value that is not a host
// ("evil.com/x", "good evil", "a b:80") must reach neither a backend nor a
// redirect's Location, where it would change the URL the client is sent to.
//
// Valid (RFC 3986 §3.2.2, §3.2.3): host [":" port], where host is a bracketed
// IPv6 literal or a reg-name of unreserved characters and sub-delims (an IPv4
// address is one), without "..", and port is at most 5 digits up to 65535.
// Refused beyond RFC 3986: an empty name, and percent-encoded names (DNS names
// have none; nginx refuses "%" too). A trailing dot (the fully qualified
// form) is valid and dropped from ctx.host, so "Example.COM." matches
// Host(`example.com`) (ctx.host is already lower case: request-read.ts hostOf).
import { isIPv6 } from 'node:net'
import type { Ctx } from './context.js'

/** By ASCII code: may appear in a reg-name (ALPHA DIGIT - . _ ~ ! $ & ' ( ) * + , ; =). */
const REG_NAME: readonly boolean[] = Array.from({ length: 128 }, (_, c) =>
  /[A-Za-z0-9\-._~!$&'()*+,;=]/.test(String.fromCharCode(c)))

function describeChar (c: number): string {
  if (c === 0x20) return 'a space'
  if (c < 0x20 || c === 0x7f) return `control character 0x${c.toString(16).padStart(2, '0').toUpperCase()}`
  if (c > 0x7f) return `non-ASCII character U+${c.toString(16).toUpperCase().padStart(4, '0')}`
  return JSON.stringify(String.fromCharCode(c))
}

/** '' when `port` (the text after ":") is a valid port: 0 to 5 digits, at most 65535. */
function portProblem (port: string): string {
  if (!/^\d{0,5}$/.test(port) || Number(port) > 65535) return `port ${JSON.stringify(port)} is not a number up to 65535`
  return ''
}

/** Why `v` is not a valid Host field value, or '' when it is. */
export function hostProblem (v: string): string {
  if (v === '') return 'empty'
  if (v.charCodeAt(0) === 0x5b) { // "[": IP literal
    const end = v.indexOf(']')
    if (end < 0 || !isIPv6(v.slice(1, end))) return 'not a valid IPv6 literal'
    if (end === v.length - 1) return ''
    return v.charCodeAt(end + 1) === 0x3a ? portProblem(v.slice(end + 2)) : 'text after the IPv6 literal'
  }
  const n = v.length
  let colon = -1
  for (let i = 0; i < n; i++) {
    const c = v.charCodeAt(i)
    if (c === 0x3a) {
      colon = i
      break
    }
    if (c === 0x25) return 'percent-encoded host names are not accepted'
    if (c >= 128 || !REG_NAME[c]!) return `${describeChar(c)} is not allowed in a host name`
    if (c === 0x2e && i > 0 && v.charCodeAt(i - 1) === 0x2e) return 'empty label ("..")'
  }
  const name = colon < 0 ? v : v.slice(0, colon)
  if (name === '' || name === '.') return 'empty host name'
  return colon < 0 ? '' : portProblem(v.slice(colon + 1))
}

// Clients send the same Host request after request: the last valid value is
// remembered, so the common request costs one string comparison. '\0' is never valid.
let lastValid = '\0'

/**
 * Checks the request's Host header: present, with a valid value (a second one
 * was refused before, by request-check.ts). Returns the reason for a 400, or ''
 * (then ctx.host has no trailing dot).
 */
export function checkHost (ctx: Ctx): string {
  const h = ctx.headers
  let value: string | null = null
  for (let i = 0; i < h.length; i += 2) {
    if (h[i] === 'host') {
      value = h[i + 1]!
      break
    }
  }
  if (value === null) return ctx.http10 ? '' : 'no Host header (HTTP/1.1 requires one)' // HTTP/1.0: routed without a host, forwarded with the server's
  if (value !== lastValid) {
    const why = hostProblem(value)
    if (why !== '') return `invalid Host header: ${why}`
    lastValid = value
  }
  const host = ctx.host
  if (host.length > 1 && host.charCodeAt(host.length - 1) === 0x2e) ctx.host = host.slice(0, -1)
  return ''
}
