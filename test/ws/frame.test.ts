// The server-side WebSocket frame codec (core/worker/ws/ws-frame.ts): parsing
// any split of the byte stream, message boundaries over fragments with
// control frames in between, protocol errors; masking round trips.
import { strict as assert } from 'node:assert'
import { test } from 'node:test'
import { type FrameSink, FrameParser, NO_STATUS, OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_TEXT, closePayload, encodeFrame, writeFrame } from '../../core/worker/ws/ws-frame.js'

/** An unmasked server frame. */
function frame (opcode: number, payload: Buffer, fin = true, rsv = 0): Buffer {
  const n = payload.length
  const head = n < 126 ? Buffer.from([0, n]) : n < 65536 ? Buffer.from([0, 126, n >> 8, n & 0xff]) : Buffer.alloc(10)
  if (n >= 65536) {
    head[1] = 127
    head.writeUInt32BE(Math.floor(n / 2 ** 32), 2)
    head.writeUInt32BE(n >>> 0, 6)
  }
  head[0] = (fin ? 0x80 : 0) | rsv | opcode
  return Buffer.concat([head, payload])
}

class Recorder implements FrameSink {
  events: string[] = []
  messages: Array<{ binary: boolean, data: Buffer }> = []
  #parts: Buffer[] = []
  onData (buf: Buffer, start: number, end: number, binary: boolean, first: boolean, last: boolean): void {
    if (first) this.#parts = []
    this.#parts.push(Buffer.from(buf.subarray(start, end)))
    if (last) this.messages.push({ binary, data: Buffer.concat(this.#parts) })
  }

  onPingFrame (p: Buffer): void { this.events.push(`ping:${p.toString()}`) }
  onPongFrame (p: Buffer): void { this.events.push(`pong:${p.toString()}`) }
  onCloseFrame (code: number, reason: Buffer): void { this.events.push(`close:${code}:${reason.toString()}`) }
}

/** Feeds `bytes` in pieces of `step` bytes through a buffer that is overwritten after each feed (as a socket read buffer is). */
function feedSplit (p: FrameParser, bytes: Buffer, step: number): string | null {
  const scratch = Buffer.alloc(step)
  for (let i = 0; i < bytes.length; i += step) {
    const n = bytes.copy(scratch, 0, i, Math.min(bytes.length, i + step))
    const err = p.feed(scratch, 0, n)
    if (err !== null) return err
    scratch.fill(0xee)
  }
  return null
}

test('messages and control frames survive any split of the stream', () => {
  const big = Buffer.alloc(70_000)
  for (let i = 0; i < big.length; i++) big[i] = i * 7
  const stream = Buffer.concat([
    frame(OP_TEXT, Buffer.from('hello')),
    frame(OP_BINARY, Buffer.alloc(0)),
    frame(OP_BINARY, big.subarray(0, 300)), // 16-bit length
    frame(OP_BINARY, big), // 64-bit length
    frame(OP_TEXT, Buffer.from('frag'), false),
    frame(OP_PING, Buffer.from('p1')), // control frames may come between fragments
    frame(OP_CONT, Buffer.alloc(0), false),
    frame(OP_CONT, Buffer.from('ment'), false),
    frame(OP_CONT, Buffer.from('ed'), true),
    frame(0xa, Buffer.from('p2')),
    frame(OP_CLOSE, closePayload(4001, Buffer.from('bye')) as Buffer),
    frame(OP_CLOSE, Buffer.alloc(0)),
  ])
  for (const step of [1, 2, 3, 7, 125, 4096, stream.length]) {
    const r = new Recorder()
    assert.equal(feedSplit(new FrameParser(r), stream, step), null, `step ${step}`)
    assert.deepEqual(r.messages.map((m) => [m.binary, m.data.length]), [[false, 5], [true, 0], [true, 300], [true, 70_000], [false, 10]], `step ${step}`)
    assert.equal(r.messages[0]!.data.toString(), 'hello')
    assert.ok(r.messages[3]!.data.equals(big))
    assert.equal(r.messages[4]!.data.toString(), 'fragmented')
    assert.deepEqual(r.events, ['ping:p1', 'pong:p2', 'close:4001:bye', `close:${NO_STATUS}:`], `step ${step}`)
  }
})

test('protocol errors are reported', () => {
  const err = (bytes: Buffer): string | null => new FrameParser(new Recorder()).feed(bytes, 0, bytes.length)
  assert.match(err(frame(OP_TEXT, Buffer.from('x'), true, 0x40))!, /reserved bits/)
  const masked = frame(OP_TEXT, Buffer.from('x'))
  masked[1]! |= 0x80
  assert.match(err(masked)!, /masked frame/)
  assert.match(err(frame(OP_CONT, Buffer.from('x')))!, /continuation frame outside a message/)
  assert.match(err(Buffer.concat([frame(OP_TEXT, Buffer.from('a'), false), frame(OP_TEXT, Buffer.from('b'))]))!, /new message inside a fragmented one/)
  assert.match(err(frame(OP_PING, Buffer.alloc(126)))!, /oversized control frame/)
  assert.match(err(frame(OP_PING, Buffer.alloc(1), false))!, /fragmented or oversized control frame/)
  assert.match(err(frame(0x3, Buffer.alloc(1)))!, /unknown opcode 3/)
  assert.match(err(frame(OP_CLOSE, Buffer.from([0x03, 0xed])))!, /invalid close code 1005/)
  assert.match(err(frame(OP_CLOSE, Buffer.from([0x03])))!, /1-byte payload/)
})

/** Asserts that `f` is one masked binary frame whose unmasked payload is `payload`. */
function assertMasked (f: Buffer, payload: Uint8Array, what: string): void {
  assert.equal(f[0], 0x80 | OP_BINARY)
  assert.equal(f[1]! & 0x80, 0x80, 'masked')
  let len = f[1]! & 0x7f
  let p = 2
  if (len === 126) { len = f.readUInt16BE(2); p = 4 } else if (len === 127) { len = f.readUInt32BE(6); p = 10 }
  assert.equal(len, payload.length)
  assert.equal(f.length, p + 4 + len, what)
  const key = f.subarray(p, p + 4)
  const out = Buffer.from(f.subarray(p + 4))
  for (let i = 0; i < out.length; i++) out[i]! ^= key[i & 3]!
  assert.ok(out.equals(payload), what)
}

function pattern (n: number, offset: number): Buffer {
  const src = Buffer.alloc(n + offset)
  for (let i = 0; i < src.length; i++) src[i] = (i * 31) & 0xff
  return src.subarray(offset)
}

test('encodeFrame masks every payload size and alignment so that unmasking gives it back', () => {
  for (const n of [0, 1, 125, 126, 255, 256, 257, 1000, 65535, 65536, 100_001]) {
    for (const offset of [0, 1, 3]) assertMasked(encodeFrame(OP_BINARY, pattern(n, offset)), pattern(n, offset), `n=${n} offset=${offset}`)
  }
  // keys differ from frame to frame
  const keys = new Set(Array.from({ length: 50 }, () => encodeFrame(OP_TEXT, Buffer.from('x')).readUInt32BE(2)))
  assert.ok(keys.size > 45)
})

test('writeFrame masks in place at any place in a staging buffer, leaving the bytes around it alone', () => {
  const out = Buffer.alloc(4096)
  const out32 = new Uint32Array(out.buffer, out.byteOffset, out.length >>> 2)
  for (let n = 0; n <= 300; n++) {
    for (let at = 0; at < 8; at++) {
      out.fill(0xee)
      const payload = pattern(n, at & 3)
      const end = writeFrame(out, at, OP_BINARY, payload, out32)
      assertMasked(out.subarray(at, end), payload, `n=${n} at=${at}`)
      assert.ok(out.subarray(0, at).every((b) => b === 0xee) && out.subarray(end).every((b) => b === 0xee), `n=${n} at=${at}: outside untouched`)
    }
  }
})
