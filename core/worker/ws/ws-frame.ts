// WebSocket frames (RFC 6455 §5) on the server side of a proxied WebSocket.
// Toward the server the balancer is the client: it masks every frame it
// sends and expects unmasked frames back. No extension is ever negotiated
// with the server (Sec-WebSocket-Extensions is not forwarded), so RSV bits
// must be 0.
//
// The parser is fed socket reads (views into a reused buffer, valid only
// during the call) and hands payload on as views too: a data frame's payload
// is delivered piece by piece as it arrives, with message boundaries flagged,
// so no message is ever reassembled here. Only frame headers and control
// payloads (at most 125 bytes) are copied. Every header is gathered in one
// small buffer, whole or split across reads: at most 10 bytes, since servers
// never mask (a masked frame is refused once its length is read, before its
// masking key).
import { randomFillSync } from 'node:crypto'

export const OP_CONT = 0x0
export const OP_TEXT = 0x1
export const OP_BINARY = 0x2
export const OP_CLOSE = 0x8
export const OP_PING = 0x9
export const OP_PONG = 0xa

/** Close code when a close frame carries none (never sent on the wire). */
export const NO_STATUS = 1005

export interface FrameSink {
  /**
   * A piece of a text or binary message: buf[start, end). `first`: no piece of
   * this message came before; `last`: the message ends with this piece. An
   * empty piece is delivered only when it starts or ends a message.
   */
  onData (buf: Buffer, start: number, end: number, binary: boolean, first: boolean, last: boolean): void
  onPingFrame (payload: Buffer): void
  onPongFrame (payload: Buffer): void
  /** `code` is NO_STATUS when the frame had no payload */
  onCloseFrame (code: number, reason: Buffer): void
}

/** Close codes a peer may put on the wire (RFC 6455 §7.4, IANA registry). */
export function isWireCloseCode (code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999)
}

const ST_HEADER = 0
const ST_PAYLOAD = 1
const ST_CONTROL = 2

export class FrameParser {
  readonly #sink: FrameSink
  #state = ST_HEADER
  /** the current frame's header bytes, kept across reads until complete (see headerLength) */
  readonly #hdr = Buffer.alloc(10)
  #hdrLen = 0
  readonly #ctrl = Buffer.alloc(125)
  #ctrlLen = 0
  #opcode = 0
  #fin = false
  #remaining = 0
  /** inside a fragmented message (a data frame without FIN was seen) */
  #inMessage = false
  #binary = false
  /** a piece of the current message was delivered */
  #started = false

  constructor (sink: FrameSink) {
    this.#sink = sink
  }

  /** Feeds bytes; returns a reason when the server broke the protocol (close with 1002), else null. */
  feed (buf: Buffer, start: number, end: number): string | null {
    while (start < end) {
      if (this.#state === ST_PAYLOAD) {
        const n = Math.min(this.#remaining, end - start)
        this.#remaining -= n
        this.#piece(buf, start, start + n)
        start += n
        if (this.#remaining === 0) this.#state = ST_HEADER
        continue
      }
      if (this.#state === ST_CONTROL) {
        const n = Math.min(this.#remaining, end - start)
        buf.copy(this.#ctrl, this.#ctrlLen, start, start + n)
        this.#ctrlLen += n
        this.#remaining -= n
        start += n
        if (this.#remaining === 0) {
          const err = this.#control()
          if (err !== null) return err
        }
        continue
      }
      // ST_HEADER: gather 2 bytes, then the extended length
      const need = this.#hdrLen < 2 ? 2 : headerLength(this.#hdr[1]!)
      // byte by byte: at most 10, where Buffer.copy would make two views per call
      const stop = Math.min(start + need - this.#hdrLen, end)
      const hdr = this.#hdr
      while (start < stop) hdr[this.#hdrLen++] = buf[start++]!
      if (this.#hdrLen < 2 || this.#hdrLen < headerLength(this.#hdr[1]!)) continue
      const err = this.#header()
      if (err !== null) return err
      // a frame with nothing to read completes here (the while condition may not run again)
      if (this.#state === ST_PAYLOAD && this.#remaining === 0) {
        this.#piece(buf, start, start)
        this.#state = ST_HEADER
      } else if (this.#state === ST_CONTROL && this.#remaining === 0) {
        const cerr = this.#control()
        if (cerr !== null) return cerr
      }
    }
    return null
  }

  #header (): string | null {
    const h = this.#hdr
    this.#hdrLen = 0
    const b0 = h[0]!
    const b1 = h[1]!
    if ((b0 & 0x70) !== 0) return 'reserved bits set (no extension was negotiated)'
    if ((b1 & 0x80) !== 0) return 'masked frame from the server'
    const fin = (b0 & 0x80) !== 0
    const opcode = b0 & 0x0f
    let len = b1 & 0x7f
    if (len === 126) len = h.readUInt16BE(2)
    else if (len === 127) {
      const hi = h.readUInt32BE(2)
      if (hi > 0x1fffff) return 'frame length over 2^53'
      len = hi * 4294967296 + h.readUInt32BE(6)
    }
    if (opcode >= 0x8) {
      if (opcode > OP_PONG) return `unknown opcode ${opcode}`
      if (!fin || len > 125) return 'fragmented or oversized control frame'
      this.#opcode = opcode
      this.#ctrlLen = 0
      this.#remaining = len
      this.#state = ST_CONTROL
      return null
    }
    if (opcode === OP_CONT) {
      if (!this.#inMessage) return 'continuation frame outside a message'
    } else if (opcode === OP_TEXT || opcode === OP_BINARY) {
      if (this.#inMessage) return 'new message inside a fragmented one'
      this.#inMessage = true
      this.#binary = opcode === OP_BINARY
      this.#started = false
    } else {
      return `unknown opcode ${opcode}`
    }
    this.#fin = fin
    this.#remaining = len
    this.#state = ST_PAYLOAD
    return null
  }

  #piece (buf: Buffer, start: number, end: number): void {
    const last = this.#remaining === 0 && this.#fin
    // an empty piece that does not end the message carries nothing (an empty first frame included)
    if (end > start || last) {
      this.#sink.onData(buf, start, end, this.#binary, !this.#started, last)
      this.#started = true
    }
    if (last) {
      this.#inMessage = false
      this.#started = false
    }
  }

  #control (): string | null {
    this.#state = ST_HEADER
    const payload = this.#ctrl.subarray(0, this.#ctrlLen)
    switch (this.#opcode) {
      case OP_PING: this.#sink.onPingFrame(payload); return null
      case OP_PONG: this.#sink.onPongFrame(payload); return null
      default: {
        if (payload.length === 1) return 'close frame with a 1-byte payload'
        const code = payload.length === 0 ? NO_STATUS : payload.readUInt16BE(0)
        if (payload.length > 0 && !isWireCloseCode(code)) return `invalid close code ${code}`
        this.#sink.onCloseFrame(code, payload.subarray(2))
        return null
      }
    }
  }
}

/** Bytes of a server frame's header given its second byte (servers never mask). */
function headerLength (b1: number): number {
  const len = b1 & 0x7f
  return len === 126 ? 4 : len === 127 ? 10 : 2
}

// Masking keys come from a pool refilled from the CSPRNG 1024 keys at a time
// (RFC 6455 §5.3: unpredictable keys), not one getRandomValues call per frame.
const KEYS = Buffer.allocUnsafeSlow(4096)
let keyPos = KEYS.length
const KEY = new Uint8Array(4)
const KEY32 = new Uint32Array(KEY.buffer) // the key as one native-order word, for word-wise XOR

/** Below this payload size a byte loop is as fast as setting up word views. */
export const WORDWISE_MIN = 256

/** Bytes of a masked frame (client → server) carrying `n` payload bytes. */
export function maskedFrameBytes (n: number): number {
  return (n < 126 ? 2 : n < 65536 ? 4 : 10) + 4 + n
}

/**
 * One masked frame (client → server) carrying `payload` (not modified): the
 * header and the masked copy in one new buffer, ready for one write. The copy
 * is needed anyway, since the payload's memory (a uWS message) is gone once
 * the caller returns.
 */
export function encodeFrame (opcode: number, payload: Uint8Array): Buffer {
  const n = payload.length
  const size = maskedFrameBytes(n)
  let out: Buffer
  if (n < WORDWISE_MIN) out = Buffer.allocUnsafe(size)
  else {
    // the payload at an 8-byte aligned offset, so that the XOR can run on 32-bit words
    const pad = (8 - ((size - n) & 7)) & 7
    out = Buffer.allocUnsafeSlow(pad + size).subarray(pad)
  }
  writeFrame(out, 0, opcode, payload)
  return out
}

/**
 * Writes one masked frame carrying `payload` into out[at, at + maskedFrameBytes(n))
 * (frame-staging.ts chooses `at`); returns its end. `out32`: a view of out's
 * whole memory as 32-bit words (out.byteOffset a multiple of 4), to mask in place.
 */
export function writeFrame (out: Buffer, at: number, opcode: number, payload: Uint8Array, out32: Uint32Array | null = null): number {
  const n = payload.length
  out[at] = 0x80 | opcode
  let p = at + 2
  if (n < 126) out[at + 1] = 0x80 | n
  else if (n < 65536) {
    out[at + 1] = 0x80 | 126
    out.writeUInt16BE(n, at + 2)
    p += 2
  } else {
    out[at + 1] = 0x80 | 127
    out.writeUInt32BE(Math.floor(n / 4294967296), at + 2)
    out.writeUInt32BE(n >>> 0, at + 6)
    p += 8
  }
  if (keyPos === KEYS.length) {
    randomFillSync(KEYS)
    keyPos = 0
  }
  for (let i = 0; i < 4; i++) KEY[i] = out[p + i] = KEYS[keyPos++]!
  p += 4
  if (out32 !== null) maskInPlace(out, out32, p, payload)
  else maskCopy(out, p, payload)
  return p + n
}

/** Masked copy of `payload` at out[p]: 32-bit words from WORDWISE_MIN bytes when both sides are 4-byte aligned. */
function maskCopy (out: Buffer, p: number, payload: Uint8Array): void {
  const n = payload.length
  let i = 0
  const words = n >>> 2
  if (n >= WORDWISE_MIN && ((payload.byteOffset & 3) === 0) && (((out.byteOffset + p) & 3) === 0)) {
    const src = new Uint32Array(payload.buffer, payload.byteOffset, words)
    const dst = new Uint32Array(out.buffer, out.byteOffset + p, words)
    const k = KEY32[0]!
    for (let w = 0; w < words; w++) dst[w] = src[w]! ^ k
    i = words << 2
  }
  for (; i < n; i++) out[p + i] = payload[i]! ^ KEY[i & 3]!
}

/** The key turned to start at another byte of it (TURNED32: as one native-order word) */
const TURNED = new Uint8Array(4)
const TURNED32 = new Uint32Array(TURNED.buffer)

/**
 * Copies `payload` to out[p] (memmove), then masks it there: bytes up to the
 * first 4-byte aligned address, then 32-bit words through `out32` with the key
 * turned to match, then the last bytes. No view is made per call.
 */
function maskInPlace (out: Buffer, out32: Uint32Array, p: number, payload: Uint8Array): void {
  const n = payload.length
  out.set(payload, p)
  const lead = Math.min(n, (4 - ((out.byteOffset + p) & 3)) & 3)
  for (let i = 0; i < lead; i++) out[p + i] = out[p + i]! ^ KEY[i]!
  for (let t = 0; t < 4; t++) TURNED[t] = KEY[(lead + t) & 3]!
  const k = TURNED32[0]!
  const w0 = (out.byteOffset + p + lead - out32.byteOffset) >>> 2
  const words = (n - lead) >>> 2
  for (let w = w0; w < w0 + words; w++) out32[w] = out32[w]! ^ k
  for (let i = lead + (words << 2); i < n; i++) out[p + i] = out[p + i]! ^ KEY[i & 3]!
}

/** Payload of a close frame: the code (unless NO_STATUS or 0) and a reason cut to fit 125 bytes. */
export function closePayload (code: number, reason: Uint8Array): Uint8Array {
  if (code === 0 || code === NO_STATUS) return new Uint8Array(0)
  const r = reason.subarray(0, 123)
  const out = Buffer.allocUnsafe(2 + r.length)
  out.writeUInt16BE(code, 0)
  out.set(r, 2)
  return out
}
