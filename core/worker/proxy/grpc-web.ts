// gRPC-Web (the grpcWeb middleware, plugins/grpc-web.ts) on the h2 proxy's
// stream: a browser's request (HTTP/1.1 or HTTP/2; application/grpc-web[+proto]
// or, base64, application/grpc-web-text[+proto]) goes to the gRPC server as
// application/grpc, and the answer comes back as gRPC-Web: the same
// length-prefixed messages in the body, the trailers (grpc-status,
// grpc-message) as one last frame flagged 0x80 whose payload is an HTTP/1 header
// block (grpc/grpc PROTOCOL-WEB.md), since a browser cannot read HTTP trailers.
// In text mode every piece of the body is base64 on its own (padded): a client
// decodes it four characters at a time, so the pieces may simply follow.

/** Ctx.grpcWeb: 0 not gRPC-Web (or no grpcWeb middleware on the route), 1 binary, 2 base64 text */
export const GRPC_WEB_BINARY = 1
export const GRPC_WEB_TEXT = 2

/** The gRPC-Web mode of a request's content-type: 0, GRPC_WEB_BINARY or GRPC_WEB_TEXT. */
export function grpcWebMode (contentType: string): number {
  if (!contentType.startsWith('application/grpc-web')) return 0
  const rest = contentType.slice(20)
  if (rest === '' || rest[0] === '+' || rest[0] === ';') return GRPC_WEB_BINARY
  if (rest.startsWith('-text') && (rest.length === 5 || rest[5] === '+' || rest[5] === ';')) return GRPC_WEB_TEXT
  return 0
}

/** application/grpc-web[-text]+X → application/grpc+X (the message format suffix kept). */
export function grpcContentType (contentType: string): string {
  const plus = contentType.indexOf('+')
  return plus < 0 ? 'application/grpc' : 'application/grpc' + contentType.slice(plus).split(';')[0]!
}

/** The answer's content-type for the browser: application/grpc[+X] → application/grpc-web[-text][+X]. */
export function webContentType (grpcType: string, mode: number): string {
  const plus = grpcType.indexOf('+')
  return (mode === GRPC_WEB_TEXT ? 'application/grpc-web-text' : 'application/grpc-web') + (plus < 0 ? '' : grpcType.slice(plus).split(';')[0]!)
}

/** Decodes a text-mode request body as it comes: base64 four characters at a time, the rest kept for the next piece. */
export class Base64Reader {
  #rest = ''

  push (chunk: Uint8Array, last: boolean): Buffer {
    let s = this.#rest + Buffer.from(chunk).toString('latin1').replace(/[\r\n\s]/g, '')
    const cut = last ? s.length : s.length - (s.length % 4)
    this.#rest = s.slice(cut)
    s = s.slice(0, cut)
    // padded segments may follow one another ("...=" then more): groups of four then decode on their own
    const pad = s.indexOf('=')
    if (pad < 0 || pad >= s.length - 2) return Buffer.from(s, 'base64')
    const out: Buffer[] = []
    for (let i = 0; i < s.length; i += 4) out.push(Buffer.from(s.slice(i, i + 4), 'base64'))
    return Buffer.concat(out)
  }
}

/** The body piece for the browser: as is, or base64 (padded) in text mode. */
export function webBody (d: Buffer, mode: number): Buffer {
  return mode === GRPC_WEB_TEXT ? Buffer.from(d.toString('base64'), 'latin1') : d
}

/** The trailers as gRPC-Web's last frame: flag 0x80, a 4-byte length, "name: value\r\n" lines. */
export function trailerFrame (trailers: readonly string[], mode: number): Buffer {
  let block = ''
  for (let i = 0; i < trailers.length; i += 2) block += `${trailers[i]!.toLowerCase()}: ${trailers[i + 1]!}\r\n`
  const payload = Buffer.from(block, 'utf8')
  const frame = Buffer.allocUnsafe(5 + payload.length)
  frame[0] = 0x80
  frame.writeUInt32BE(payload.length, 1)
  payload.copy(frame, 5)
  return webBody(frame, mode)
}
