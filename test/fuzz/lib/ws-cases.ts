// Client WebSocket frames for the campaign: well-formed messages (which must
// come back from an echo server) and every kind of protocol error RFC 6455
// says ends the session (which must close it: a close frame or the TCP close).
import type { Rng } from './prng.js'

export interface WsCase {
  family: string
  /** frames sent after the upgrade */
  bytes: Buffer
  /** 'echo': the payload comes back; 'close': the session ends; 'any': only stay up */
  expect: 'echo' | 'close' | 'any'
  /** for 'echo': the payload expected back */
  echo: Buffer
}

/** One client frame: masked unless `mask` is false; `len` overrides the length field. */
export function frame (opcode: number, payload: Buffer, o: { fin?: boolean, mask?: boolean, rsv?: number, len?: bigint } = {}): Buffer {
  const n = o.len ?? BigInt(payload.length)
  const mask = o.mask !== false
  const head: number[] = [((o.fin ?? true) ? 0x80 : 0) | ((o.rsv ?? 0) << 4) | opcode]
  const m = mask ? 0x80 : 0
  if (n < 126n) head.push(m | Number(n))
  else if (n < 65536n) head.push(m | 126, Number(n >> 8n), Number(n & 255n))
  else {
    head.push(m | 127)
    for (let i = 7; i >= 0; i--) head.push(Number((n >> BigInt(8 * i)) & 255n))
  }
  if (!mask) return Buffer.concat([Buffer.from(head), payload])
  const key = Buffer.from([0x37, 0xfa, 0x21, 0x3d])
  const body = Buffer.from(payload)
  for (let i = 0; i < body.length; i++) body[i]! ^= key[i & 3]!
  return Buffer.concat([Buffer.from(head), key, body])
}

const text = (s: string): Buffer => Buffer.from(s)
const closeBody = (code: number, reason = ''): Buffer => Buffer.concat([Buffer.from([code >> 8, code & 255]), Buffer.from(reason)])
const BAD_CODES = [0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535]

const FAMILIES = ['valid', 'fragmented', 'unmasked', 'bad-opcode', 'rsv', 'fragment-error', 'control-frame', 'oversize', 'close-code', 'bad-utf8', 'garbage'] as const

export function wsCase (rng: Rng): WsCase {
  const family = rng.pick(FAMILIES)
  const payload = text(rng.word(rng.pick([5, 60, 200])))
  const none = Buffer.alloc(0)
  switch (family) {
    case 'valid': {
      const ping = rng.chance(0.3) ? frame(0x9, text('p')) : none
      return { family, bytes: Buffer.concat([ping, frame(rng.pick([0x1, 0x2]), payload)]), expect: 'echo', echo: payload }
    }
    case 'fragmented': {
      const cut = rng.int(payload.length)
      const mid = rng.chance(0.5) ? frame(0x9, text('p')) : none
      return { family, bytes: Buffer.concat([frame(0x1, payload.subarray(0, cut), { fin: false }), mid, frame(0x0, payload.subarray(cut))]), expect: 'echo', echo: payload }
    }
    case 'unmasked':
      return { family, bytes: frame(rng.pick([0x1, 0x2, 0x9]), payload, { mask: false }), expect: 'close', echo: none }
    case 'bad-opcode':
      return { family, bytes: frame(rng.pick([3, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf]), payload), expect: 'close', echo: none }
    case 'rsv':
      return { family, bytes: frame(0x1, payload, { rsv: rng.range(1, 7) }), expect: 'close', echo: none }
    case 'fragment-error': {
      const kind = rng.int(3)
      // a continuation with nothing to continue; a new data frame inside an unfinished message; a message left unfinished by a second start
      const bytes = kind === 0
        ? frame(0x0, payload)
        : kind === 1
          ? Buffer.concat([frame(0x1, payload, { fin: false }), frame(rng.pick([0x1, 0x2]), payload)])
          : Buffer.concat([frame(0x2, payload, { fin: false }), frame(0x1, payload, { fin: false }), frame(0x0, payload)])
      return { family, bytes, expect: 'close', echo: none }
    }
    case 'control-frame': // a fragmented control frame, or one over 125 bytes
      return { family, bytes: rng.chance(0.5) ? frame(rng.pick([0x8, 0x9, 0xa]), text('x'), { fin: false }) : frame(rng.pick([0x9, 0xa]), Buffer.alloc(126 + rng.int(200), 120)), expect: 'close', echo: none }
    case 'oversize': // lengths over the entry point's limit (64 KiB here), up to the 64-bit field's top bit
      return { family, bytes: frame(0x2, none, { len: rng.pick([65_537n, 1n << 32n, (1n << 63n) - 1n, 1n << 63n, (1n << 64n) - 1n]) }), expect: 'close', echo: none }
    case 'close-code': {
      const body = rng.chance(0.2) ? Buffer.from([3]) : closeBody(rng.pick(BAD_CODES), rng.chance(0.3) ? '\xff' : '')
      return { family, bytes: frame(0x8, body), expect: 'close', echo: none }
    }
    case 'bad-utf8':
      return { family, bytes: frame(0x1, Buffer.from([0x61, rng.pick([0xff, 0xc0, 0xed, 0xf5]), 0xa0, 0x80])), expect: 'close', echo: none }
    default:
      return { family, bytes: rng.bytes(rng.range(1, 100)), expect: 'any', echo: none }
  }
}
