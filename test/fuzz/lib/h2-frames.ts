// HTTP/2 frames by hand (RFC 9113 §4.1, §6) for the h2 fuzz surface: any
// length, type, flags and stream id, whether or not they make sense, and a
// reader that splits what lb sends back into frames.

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')

export const T = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const

export const F = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const

/** Error codes (RFC 9113 §7) */
export const E = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const

export const ERROR_NAMES: readonly string[] = Object.keys(E)
export const errorName = (code: number): string => ERROR_NAMES[code] ?? `0x${code.toString(16)}`

/** SETTINGS identifiers (RFC 9113 §6.5.2) */
export const S = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const

/** One frame; `length` overrides the 24-bit length field (a lie about the payload), `reserved` sets the stream id's top bit. */
export function frame (type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0), o: { length?: number, reserved?: boolean } = {}): Buffer {
  const h = Buffer.alloc(9)
  h.writeUIntBE(o.length ?? payload.length, 0, 3)
  h[3] = type
  h[4] = flags
  h.writeUInt32BE(((stream & 0x7fffffff) | (o.reserved === true ? 0x80000000 : 0)) >>> 0, 5)
  return Buffer.concat([h, payload])
}

export function settings (pairs: ReadonlyArray<readonly [number, number]>, flags = 0, stream = 0): Buffer {
  const p = Buffer.alloc(6 * pairs.length)
  pairs.forEach(([id, v], i) => { p.writeUInt16BE(id, i * 6); p.writeUInt32BE(v >>> 0, i * 6 + 2) })
  return frame(T.SETTINGS, flags, stream, p)
}

export const settingsAck = (): Buffer => frame(T.SETTINGS, F.ACK, 0)

export function windowUpdate (stream: number, increment: number): Buffer {
  const p = Buffer.alloc(4)
  p.writeUInt32BE(increment >>> 0)
  return frame(T.WINDOW_UPDATE, 0, stream, p)
}

export function rstStream (stream: number, code: number): Buffer {
  const p = Buffer.alloc(4)
  p.writeUInt32BE(code >>> 0)
  return frame(T.RST_STREAM, 0, stream, p)
}

export function ping (data: Buffer, ack = false): Buffer {
  return frame(T.PING, ack ? F.ACK : 0, 0, data)
}

/** PRIORITY payload (or the HEADERS priority block): exclusive bit, dependency, weight */
export function priorityBlock (dependsOn: number, weight = 15, exclusive = false): Buffer {
  const p = Buffer.alloc(5)
  p.writeUInt32BE(((dependsOn & 0x7fffffff) | (exclusive ? 0x80000000 : 0)) >>> 0)
  p[4] = weight
  return p
}

/** A HEADERS frame carrying `block`, END_HEADERS set unless `more`; `priority` prepends a priority block. */
export function headers (stream: number, block: Buffer, o: { endStream?: boolean, more?: boolean, priority?: Buffer, padding?: number } = {}): Buffer {
  let flags = (o.endStream === true ? F.END_STREAM : 0) | (o.more === true ? 0 : F.END_HEADERS)
  let payload = block
  if (o.priority !== undefined) { flags |= F.PRIORITY; payload = Buffer.concat([o.priority, payload]) }
  if (o.padding !== undefined) { flags |= F.PADDED; payload = Buffer.concat([Buffer.from([o.padding]), payload, Buffer.alloc(o.padding)]) }
  return frame(T.HEADERS, flags, stream, payload)
}

export function data (stream: number, body: Buffer | string, endStream = false, padding?: number): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body) : body
  if (padding === undefined) return frame(T.DATA, endStream ? F.END_STREAM : 0, stream, b)
  return frame(T.DATA, (endStream ? F.END_STREAM : 0) | F.PADDED, stream, Buffer.concat([Buffer.from([padding]), b, Buffer.alloc(padding)]))
}

export interface Frame { type: number, flags: number, stream: number, payload: Buffer }

/** Splits `buf` into whole frames; `rest` is an incomplete tail. */
export function parseFrames (buf: Buffer): { frames: Frame[], rest: Buffer } {
  const frames: Frame[] = []
  let at = 0
  while (buf.length - at >= 9) {
    const len = buf.readUIntBE(at, 3)
    if (buf.length - at < 9 + len) break
    frames.push({ type: buf[at + 3]!, flags: buf[at + 4]!, stream: buf.readUInt32BE(at + 5) & 0x7fffffff, payload: buf.subarray(at + 9, at + 9 + len) })
    at += 9 + len
  }
  return { frames, rest: buf.subarray(at) }
}
