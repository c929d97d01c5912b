// The head of a request as forwarded upstream (HTTP and WebSocket alike): the
// request line, the client's headers minus `skip` (hop-by-hop ones and those
// set here) and the ones a middleware dropped, headers a middleware added,
// then the forwarding headers: Host kept (or `hostFallback` when the client sent
// none), X-Real-IP set, X-Forwarded-For appended, X-Forwarded-Proto set, and
// X-LB-User (never taken from a client) to the generation service.
// `skip` must be true for 'x-forwarded-for': its values are read (every line, in
// order, as nginx's $proxy_add_x_forwarded_for), then re-emitted with the client appended.
// A name with "_" that reads as a skipped or dropped one with "-" ("x_real_ip",
// "x-auth-request_user") is dropped too: CGI, WSGI and Rack servers map both to
// one variable (HTTP_X_REAL_IP), so the client's copy would stand for lb's.
import { claimHeaderValue } from '../../auth/claim-header.js'
import type { Ctx } from '../request/context.js'

export function forwardHead (ctx: Ctx, method: string, skip: (name: string) => boolean, hostFallback: string, extraLines: string): string {
  let h = method + ' ' + (ctx.query === '' ? ctx.path : ctx.path + '?' + ctx.query) + ' HTTP/1.1\r\n'
  const headers = ctx.headers
  const drop = ctx.dropHeaders
  let xff = ''
  let hasHost = false
  for (let i = 0; i < headers.length; i += 2) {
    const k = headers[i]!
    if (skip(k)) {
      if (k === 'x-forwarded-for') xff = xff === '' ? headers[i + 1]! : xff + ', ' + headers[i + 1]!
      continue
    }
    if (drop !== null && drop.includes(k)) continue
    if (k.includes('_')) {
      const dashed = k.replaceAll('_', '-')
      if (skip(dashed) || (drop !== null && drop.includes(dashed))) continue
    }
    if (k === 'host') hasHost = true
    h += k + ': ' + headers[i + 1]! + '\r\n'
  }
  const extra = ctx.upstreamHeaders
  if (extra !== null) for (let i = 0; i < extra.length; i += 2) h += extra[i]! + ': ' + extra[i + 1]! + '\r\n'
  if (!hasHost) h += 'host: ' + hostFallback + '\r\n'
  const ip = ctx.remoteAddress
  return h + extraLines + 'x-real-ip: ' + ip + '\r\nx-forwarded-for: ' + (xff === '' ? ip : xff + ', ' + ip) +
    '\r\nx-forwarded-proto: ' + ctx.proto + '\r\n\r\n'
}

/**
 * Request headers never forwarded: hop-by-hop (RFC 9110 §7.6.1) and the ones
 * the proxy sets itself. Names arrive lower-case (uWS); switching on the length
 * spares hashing every fresh name string, as a Set lookup would.
 */
function isHop (k: string): boolean {
  switch (k.length) {
    case 2: return k === 'te'
    case 7: return k === 'trailer' || k === 'upgrade'
    case 9: return k === 'x-real-ip' || k === 'x-lb-user'
    case 10: return k === 'connection' || k === 'keep-alive'
    case 15: return k === 'x-forwarded-for'
    case 16: return k === 'proxy-connection'
    case 17: return k === 'transfer-encoding' || k === 'x-forwarded-proto'
    default: return false
  }
}

/**
 * The head of a proxied HTTP request: its method as sent, its chunked framing kept (the body is relayed chunked).
 * `forwardUser`: the upstream is lb's generation service, told the user a middleware authenticated in x-lb-user
 * (its consumer for budgets, core/gen/budget/consumer.ts); a client's own x-lb-user never passes (isHop).
 */
export function httpRequestHead (ctx: Ctx, hostFallback: string, forwardUser = false): string {
  let extra = ctx.chunked ? 'transfer-encoding: chunked\r\n' : ''
  if (forwardUser && ctx.user !== '') extra += 'x-lb-user: ' + claimHeaderValue(ctx.user) + '\r\n'
  return forwardHead(ctx, ctx.method, isHop, hostFallback, extra)
}

/**
 * The last chunk of a chunked request body with the client's trailer fields
 * (only the node engine delivers any), less those a trailer must not carry or
 * that lb decides on (RFC 9110 §6.5.1): framing, routing, authentication,
 * hop-by-hop, and the forwarding headers lb sets.
 */
export function lastChunk (trailers: readonly string[]): string {
  let s = '0\r\n'
  for (let i = 0; i + 1 < trailers.length; i += 2) {
    const k = trailers[i]!
    if (isHop(k) || NOT_TRAILERS.has(k)) continue
    s += k + ': ' + trailers[i + 1]! + '\r\n'
  }
  return s + '\r\n'
}

const NOT_TRAILERS = new Set(['content-length', 'host', 'authorization', 'proxy-authorization', 'cookie', 'expect', 'content-encoding', 'content-type', 'content-range'])

const CRLF = Buffer.from('\r\n')
const LAST_CHUNK = Buffer.from('0\r\n\r\n')

/** A piece of a request body to the server, in chunked framing when the request is chunked; write()'s answer (false: wait for 'drain'). */
export function writeBodyPiece (conn: { write (d: string | Buffer): boolean }, chunk: Buffer, chunked: boolean): boolean {
  if (!chunked) return conn.write(chunk)
  if (chunk.length === 0) return true
  conn.write(chunk.length.toString(16) + '\r\n')
  conn.write(chunk)
  return conn.write(CRLF)
}

/** The end of a chunked request body: the last chunk, with the client's trailers when it sent some. */
export function endOfChunked (trailers: readonly string[] | null): string | Buffer {
  return trailers === null ? LAST_CHUNK : lastChunk(trailers)
}
