// Errors lb makes itself, in the shape a gRPC client reads (gRPC over HTTP/2
// spec, "Responses": a Trailers-Only response, HTTP 200 with grpc-status and
// grpc-message): a gRPC library reports an HTML 503 as "Received HTTP status
// code 503" with status UNKNOWN or UNAVAILABLE whatever lb meant, so a
// client's retry policy cannot tell a rate limit from a dead service.
// DataPlane's #answer is the one place an answer's shape is decided; this says
// when and how. The mapping follows gRPC's "HTTP to gRPC Status Code Mapping",
// but where lb knows better: a rate limit or a body over max_body is
// RESOURCE_EXHAUSTED (8), a server time-out DEADLINE_EXCEEDED (4).
import type { Ctx } from '../request/context.js'

/** application/grpc and application/grpc+proto (…;params): not grpc-web, whose trailers travel in the body. */
export function isGrpc (ctx: Ctx): boolean {
  const ct = ctx.header('content-type')
  return ct.startsWith('application/grpc') && (ct.length === 16 || ct[16] === '+' || ct[16] === ';')
}

/**
 * A gRPC-Web call (application/grpc-web...) reads lb's errors the same way: HTTP 200 and grpc-status in
 * the headers (a Trailers-Only answer, which gRPC-Web clients read from the response headers).
 */
export function isGrpcWeb (ctx: Ctx): boolean {
  return ctx.header('content-type').startsWith('application/grpc-web')
}

/** The gRPC status code for an HTTP status lb answers with (>= 400). */
export function grpcCode (status: number): number {
  switch (status) {
    case 400: return 13 // INTERNAL (a request lb refused as malformed)
    case 401: return 16 // UNAUTHENTICATED
    case 403: return 7 // PERMISSION_DENIED
    case 404: return 12 // UNIMPLEMENTED (no route)
    case 413: case 429: case 431: return 8 // RESOURCE_EXHAUSTED
    case 502: case 503: return 14 // UNAVAILABLE: a client may retry
    case 504: return 4 // DEADLINE_EXCEEDED
    default: return status >= 500 ? 14 : 2 // UNKNOWN
  }
}

/** grpc-message is percent-encoded (bytes outside 0x20-0x7E, and %); the message ends at its first line. */
function grpcMessage (body: string): string {
  const line = body.split('\n', 1)[0]!
  let out = ''
  for (const b of Buffer.from(line)) out += b >= 0x20 && b <= 0x7e && b !== 0x25 ? String.fromCharCode(b) : '%' + b.toString(16).toUpperCase().padStart(2, '0')
  return out
}

/** The headers of a Trailers-Only answer standing for an HTTP `status` with `body`, plus the answer's own `extra` headers. */
export function grpcHeaders (status: number, body: string, extra: readonly string[], contentType = 'application/grpc'): string[] {
  const h = ['content-type', contentType, 'grpc-status', String(grpcCode(status)), 'grpc-message', grpcMessage(body)]
  // keep what tells the client why or when (retry-after, www-authenticate, allow), not the HTML shape's content-type
  for (let i = 0; i < extra.length; i += 2) if (extra[i] !== 'content-type') h.push(extra[i]!, extra[i + 1]!)
  return h
}
