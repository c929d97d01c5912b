// What the uWS adapter (core/worker/transport/uws/app.ts) reads of a request that needs no
// uWS: the framing and connection headers, the Host name, the peer address as
// text. Runs for every request, so the usual case (the same Host, the same
// few peers, request after request) reuses its last result instead of
// allocating.
import { canonicalIp, formatIp } from '../../net/ip.js'
import type { Ctx } from '../request/context.js'

const decoder = new TextDecoder()
const CLOSE = /(?:^|,)\s*close\s*(?:,|$)/i

/** Notes in `ctx` what one request header says of framing, Host and the connection (headers are copied by the caller). */
export function readHeader (ctx: Ctx, k: string, v: string): void {
  if (k === 'content-length') {
    ctx.contentLength = /^\d+$/.test(v) ? Number(v) : -2
  } else if (k === 'transfer-encoding') {
    ctx.chunked = true
    ctx.contentLength = -1
  } else if (k === 'host') {
    ctx.host = hostOf(v)
  } else if (k === 'connection' && CLOSE.test(v)) {
    ctx.asksClose = true
  }
}

/** The body is read when one is announced (a valid positive Content-Length, or Transfer-Encoding). */
export function expectsBody (ctx: Ctx): boolean {
  return ctx.chunked || ctx.contentLength > 0
}

// The last Host value this thread parsed, and its host name (port dropped,
// lower case): clients send the same Host request after request, so the
// lastIndexOf (a runtime call in V8, not a builtin) and the copies run only when it changes.
let lastHostValue = ''
let lastHost = ''

function hostOf (v: string): string {
  if (v !== lastHostValue) {
    const colon = v.lastIndexOf(':')
    lastHost = (colon > 0 && v.indexOf(']') < colon ? v.slice(0, colon) : v).toLowerCase()
    lastHostValue = v
  }
  return lastHost
}

// The last peer address this thread turned into text, as bytes and text: most
// requests arrive over a few keep-alive connections from a few clients, so the
// text is usually reused (uWS's own text form costs a sprintf and a decode each time).
const lastPeer = new Uint8Array(16)
let lastPeerLen = -1
let lastPeerText = ''

/** Canonical text of a peer address as uWS gives it: 4 bytes (IPv4) or 16 (IPv6, IPv4-mapped included). */
export function peerText (ab: ArrayBuffer): string {
  const b = new Uint8Array(ab)
  const n = b.length
  if (n === lastPeerLen) {
    let i = 0
    while (i < n && b[i] === lastPeer[i]) i++
    if (i === n) return lastPeerText
  }
  const text = n === 4 ? `${b[0]!}.${b[1]!}.${b[2]!}.${b[3]!}` : n === 16 ? formatIp(b) : ''
  lastPeer.set(b)
  lastPeerLen = n
  lastPeerText = text
  return text
}

/** Canonical text of the client address a PROXY v2 header gave, as uWS's text of it. */
export function proxiedText (ab: ArrayBuffer): string {
  return canonicalIp(decoder.decode(ab))
}
