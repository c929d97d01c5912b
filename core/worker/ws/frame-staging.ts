// This thread's small masked frames toward servers (ws-relay.ts), written
// into one reused buffer instead of a new Buffer each: a relay's frames of
// one loop turn lie side by side there and leave in one socket write at the
// turn's end. What it saves per message: an allocation, the Writable's
// bookkeeping of one more chunk, and a buffer in the writev.
//
// Invariant: a byte handed to a socket stays untouched until the kernel took
// it. Bytes are only ever added during a turn; the buffer is reused from the
// start in a later turn only if every socket written from it had taken all it
// was given (writableLength 0 after its turn-end write). Otherwise the old
// buffer is left to the socket that still references it, and a new one is made.
// A socket with bytes still waiting stages nothing (ws-relay.ts), so a server
// that stops reading keeps at most the buffer of the turn it stopped in.
import { currentTurn } from '../../net/turn.js'
import { WORDWISE_MIN, maskedFrameBytes, writeFrame } from './ws-frame.js'

/** bytes per staging buffer */
const ARENA_BYTES = 64 * 1024

let arena = Buffer.allocUnsafeSlow(ARENA_BYTES)
/** arena's memory as 32-bit words (allocUnsafeSlow: offset 0), for masking in place */
let arena32 = words(arena)
let used = 0
/** the turn the bytes in [0, used) belong to */
let turn = -1
/** a socket still holds bytes of this buffer: it cannot be written over */
let held = false

/** Payloads staged here; larger ones get a frame of their own (encodeFrame), masked word-wise at an aligned offset. */
export const STAGED_MAX = WORDWISE_MIN - 1

/** A range of staged bytes: what one relay will write at the end of the turn. */
export interface Staged {
  buf: Buffer | null
  start: number
  end: number
}

/**
 * Writes a masked frame of `payload` (at most STAGED_MAX bytes) into the staging
 * buffer. It extends `s` when it continues it; otherwise `flush` is called first
 * to write the range `s` holds, and `s` starts again with this frame.
 */
export function stageFrame (s: Staged, opcode: number, payload: Uint8Array, flush: () => void): void {
  const size = maskedFrameBytes(payload.length)
  if (turn !== currentTurn()) {
    turn = currentTurn()
    if (held) renew()
    else used = 0
  }
  if (used + size > arena.length) renew() // full: the ranges staged in it so far keep it alive until written
  if (s.buf !== arena || s.end !== used) {
    if (s.buf !== null) flush()
    s.buf = arena
    s.start = used
  }
  used = writeFrame(arena, used, opcode, payload, arena32)
  s.end = used
}

function words (b: Buffer): Uint32Array {
  return new Uint32Array(b.buffer, b.byteOffset, b.length >>> 2)
}

/** A new, empty buffer; the old one stays alive as long as a write references it. */
function renew (): void {
  arena = Buffer.allocUnsafeSlow(ARENA_BYTES)
  arena32 = words(arena)
  used = 0
  held = false
}

/** After a socket's write of staged bytes: whether it took them all decides whether the buffer can be reused. */
export function stagedWritten (writableLength: number): void {
  if (writableLength !== 0) held = true
}
