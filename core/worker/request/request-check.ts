// The header checks every request passes before it is routed (HTTP/1.1 and
// WebSocket upgrades alike: DataPlane.handle calls checkRequest first). A
// request that two parties could read differently is refused here, never
// forwarded (RFC 9112 §6.1, §6.3; RFC 9110 §5.5, §7.6.1):
// - Content-Length: digits only, and at most one header. Any repeat is
//   refused, even of the same value (RFC 9112 §6.3 lets a recipient merge
//   identical values; nginx and Node's llhttp refuse them, and so does lb:
//   one rule, nothing to merge before forwarding). Not with Transfer-Encoding.
// - Transfer-Encoding: one header whose value is exactly "chunked" (any case);
//   any other coding, or a list, is 501 (lb implements no other coding).
// - Host and Authorization: at most one each (lb routes and authenticates on
//   one; a backend must not see a second).
// - No DEL (0x7F) in a header value (RFC 9110 §5.5). The other control
//   characters (0x00-0x1F but HTAB) never get here: this uWS build answers
//   such a request 400 itself, which test/e2e/request-headers.test.ts checks
//   for each of them, so a uWS build that let one through fails that test.
//   Searching for one character is a native memchr; a scan for 32 of them
//   cost ~10x as much per request.
// - The method is a token (RFC 9110 §9.1): this uWS build passes "\x7fGET" on.
//   Any token is forwarded as written (extension methods, lower case: methods
//   are case-sensitive, as HAProxy and Traefik forward them), except CONNECT and
//   TRACE in any case, 501: lb is a reverse proxy, not a tunnel (CONNECT would
//   turn a pooled upstream connection into one), and TRACE echoes the request,
//   cookies and credentials included, to a script that can read the reply
//   (cross-site tracing); nginx refuses both as well.
// Headers named in Connection are hop-by-hop (RFC 9110 §7.6.1): they are
// added to the request's dropped headers, except the ones lb needs or sets.
// - The head (request line and header lines, as uWS received them less the
//   spaces around values) is at most limits.max_header_bytes: 431 naming the
//   setting. uWS's own limit is twice that (loadUws in transport/uws/native.ts), so that
//   a head over the setting reaches this check instead of uWS's anonymous 431.
//
// One pass over ctx.headers; nothing is allocated unless the request is
// refused or its Connection header names headers to drop.
import type { ErrorCode } from '../../errors.js'
import { dropRequestHeaders } from '../../plugin.js'
import { eqLower, otherTokens } from '../../net/token-list.js'
import type { Ctx } from './context.js'

/** Why a request is refused: an error code of core/errors.ts and the parameters of its message. */
export interface RequestFault {
  readonly code: ErrorCode
  readonly params: Record<string, string>
}

/**
 * Connection tokens that are not dropped as header names: close, keep-alive and
 * upgrade (every Connection carries one; they name headers dropped anyway), the
 * headers lb needs to route and frame the request (Host, Content-Length). The
 * ones lb sets itself (X-Forwarded-*, X-Real-IP) are re-emitted by
 * forward-head.ts whatever the client asked.
 */
const NOT_DROPPED = ['close', 'keep-alive', 'upgrade', 'host', 'content-length']

// headers that may come once, as bits, and their names for the message
const SINGLE_HOST = 1
const SINGLE_AUTHORIZATION = 2
const SINGLE_TRANSFER_ENCODING = 4
const SINGLE_NAMES: readonly string[] = ['', 'Host', 'Authorization', '', 'Transfer-Encoding'] // by bit

/** Checks the headers of `ctx` (see above) against a head limit in bytes; null when it may go on. May set ctx.dropHeaders. */
export function checkRequest (ctx: Ctx, maxHeadBytes: number): RequestFault | null {
  const m = ctx.method
  if (!token(m)) return fault('LB_ERR_BAD_REQUEST', { reason: `invalid method ${JSON.stringify(m)}` })
  if ((m.length === 5 && eqLower(m, 0, 'trace')) || (m.length === 7 && eqLower(m, 0, 'connect'))) return fault('LB_ERR_METHOD_NOT_IMPLEMENTED', { method: m })
  const h = ctx.headers
  let contentLength = -1 // index of the Content-Length value, -1 when none
  let transferEncoding = -1
  let seen = 0 // bits of the headers that may come once (SINGLE_*) seen so far
  // "GET /p?q HTTP/1.1\r\n", each "k: v\r\n", the empty line
  let headBytes = m.length + 1 + ctx.path.length + (ctx.query.length > 0 ? ctx.query.length + 1 : 0) + 11 + 2
  for (let i = 0; i < h.length; i += 2) {
    const k = h[i]!
    const v = h[i + 1]!
    headBytes += k.length + v.length + 4
    if (v.indexOf('\x7f') >= 0) return fault('LB_ERR_HEADER_CHAR', { char: '0x7F', name: k })
    let single = 0
    switch (k.length) {
      case 4:
        if (k === 'host') single = SINGLE_HOST
        break
      case 10:
        if (k === 'connection') {
          const names = otherTokens(v, NOT_DROPPED)
          if (names !== null) dropRequestHeaders(ctx, names)
        }
        break
      case 13:
        if (k === 'authorization') single = SINGLE_AUTHORIZATION
        break
      case 14:
        if (k === 'content-length') {
          if (!digits(v)) return fault('LB_ERR_CONTENT_LENGTH', { reason: `invalid Content-Length ${JSON.stringify(v)}` })
          if (contentLength >= 0) {
            const first = h[contentLength]!
            return fault('LB_ERR_CONTENT_LENGTH', {
              reason: first === v ? `Content-Length ${v} sent twice` : `conflicting Content-Length values ${first} and ${v}`,
            })
          }
          contentLength = i + 1
        }
        break
      case 17:
        if (k === 'transfer-encoding') {
          single = SINGLE_TRANSFER_ENCODING
          transferEncoding = i + 1
        }
        break
    }
    if (single !== 0) {
      if ((seen & single) !== 0) return fault('LB_ERR_DUPLICATE_HEADER', { name: SINGLE_NAMES[single]! })
      seen |= single
    }
  }
  if (headBytes > maxHeadBytes) return fault('LB_ERR_HEAD_TOO_LARGE', { bytes: String(headBytes), limit: String(maxHeadBytes) })
  if (transferEncoding >= 0) {
    const te = h[transferEncoding]!
    if (contentLength >= 0) return fault('LB_ERR_CONTENT_LENGTH', { reason: 'Content-Length together with Transfer-Encoding' })
    if (te.length !== 7 || !eqLower(te, 0, 'chunked')) return fault('LB_ERR_TRANSFER_ENCODING', { value: JSON.stringify(te) })
  }
  return null
}

function fault (code: ErrorCode, params: Record<string, string>): RequestFault {
  return { code, params }
}

/** A non-empty run of ASCII digits. */
function digits (v: string): boolean {
  if (v.length === 0) return false
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i)
    if (c < 48 || c > 57) return false
  }
  return true
}

/** tchar of RFC 9110 §5.6.2 besides ALPHA and DIGIT: ! # $ % & ' * + - . ^ _ ` | ~ */
const TCHAR_OTHER = "!#$%&'*+-.^_`|~"

/** A non-empty token (RFC 9110 §5.6.2). */
function token (v: string): boolean {
  if (v.length === 0) return false
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i)
    if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57)) continue
    if (c > 126 || TCHAR_OTHER.indexOf(v[i]!) < 0) return false
  }
  return true
}
