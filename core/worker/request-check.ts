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
// - No control character but HTAB in a header value (0x00-0x1F, 0x7F).
// Headers named in Connection are hop-by-hop (RFC 9110 §7.6.1): they are
// added to the request's dropped headers, except the ones lb needs or sets.
//
// One pass over ctx.headers; nothing is allocated unless the request is
// refused or its Connection header names headers to drop.
import type { ErrorCode } from '../errors.js'
import { dropRequestHeaders } from '../plugin.js'
import { eqLower } from '../upstream/response-parser.js'
import type { Ctx } from './context.js'

/** Why a request is refused: an error code of core/errors.ts and the parameters of its message. */
export interface RequestFault {
  readonly code: ErrorCode
  readonly params: Record<string, string>
}

/** Checks the headers of `ctx` (see above); null when it may go on. May set ctx.dropHeaders. */
export function checkRequest (ctx: Ctx): RequestFault | null {
  const h = ctx.headers
  let contentLength = -1 // index of the Content-Length value, -1 when none
  let transferEncoding = -1
  let host = false
  let authorization = false
  for (let i = 0; i < h.length; i += 2) {
    const k = h[i]!
    const v = h[i + 1]!
    const bad = controlChar(v)
    if (bad >= 0) return fault('LB_ERR_HEADER_CHAR', { char: hex(v.charCodeAt(bad)), name: k })
    switch (k.length) {
      case 4:
        if (k === 'host') {
          if (host) return fault('LB_ERR_DUPLICATE_HEADER', { name: 'Host' })
          host = true
        }
        break
      case 10:
        if (k === 'connection') dropNamed(ctx, v)
        break
      case 13:
        if (k === 'authorization') {
          if (authorization) return fault('LB_ERR_DUPLICATE_HEADER', { name: 'Authorization' })
          authorization = true
        }
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
          if (transferEncoding >= 0) return fault('LB_ERR_DUPLICATE_HEADER', { name: 'Transfer-Encoding' })
          transferEncoding = i + 1
        }
        break
    }
  }
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

/** Index of the first control character of `v` other than HTAB (RFC 9110 §5.5: field-value), or -1. */
function controlChar (v: string): number {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i)
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return i
  }
  return -1
}

function hex (c: number): string {
  return '0x' + c.toString(16).toUpperCase().padStart(2, '0')
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

/**
 * Adds the header names listed in a Connection value to ctx.dropHeaders,
 * lower-case. The tokens every Connection carries (close, keep-alive, upgrade)
 * name headers that are dropped anyway and allocate nothing. Never dropped:
 * the headers lb needs to route and frame the request (Host, Content-Length)
 * and the ones it sets itself (X-Forwarded-*, X-Real-IP: forward-head.ts
 * re-emits them whatever the client asked).
 */
function dropNamed (ctx: Ctx, v: string): void {
  const n = v.length
  let i = 0
  while (i < n) {
    let c = v.charCodeAt(i)
    if (c === 44 || c === 32 || c === 9) { i++; continue }
    const start = i
    while (i < n && (c = v.charCodeAt(i)) !== 44 && c !== 32 && c !== 9) i++
    const len = i - start
    if (len === 5 && eqLower(v, start, 'close')) continue
    if (len === 10 && eqLower(v, start, 'keep-alive')) continue
    if (len === 7 && eqLower(v, start, 'upgrade')) continue
    if (len === 4 && eqLower(v, start, 'host')) continue
    if (len === 14 && eqLower(v, start, 'content-length')) continue
    dropRequestHeaders(ctx, [v.slice(start, i).toLowerCase()])
  }
}
