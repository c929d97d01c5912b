// HTTP/2 frame sequences for the h2 fuzz surface, one family each, with what
// RFC 9113 (and node:http2's nghttp2) says must happen: a valid request is
// answered with the backend's body; a malformed request is a stream error
// (RST_STREAM, or an answer lb makes itself) and is never forwarded; a
// connection error ends the session with GOAWAY and the RFC's code. Paths
// carry markers: /fz/<case>/ok-<stream> must come back from the backend,
// /fz/<case>/never-<stream> must never reach it, /fz/<case>/any-<stream> may.
import type { Rng } from './prng.js'
import { E, F, S, T, data, frame, headers, ping, priorityBlock, rstStream, settings, windowUpdate } from './h2-frames.js'
import { headerBlock, hpackInt, hpackString, literal } from './hpack.js'

export interface Refusal {
  /**
   * 'stream': RST_STREAM on `stream` (or a 4xx lb made, or a GOAWAY); 'conn': GOAWAY;
   * 'ignored': GOAWAY, or the frame is dropped and `stream` gets no answer
   */
  level: 'stream' | 'conn' | 'ignored'
  stream: number
  /** acceptable error codes */
  codes: readonly number[]
  /** 'stream' only: dropping the frame (no answer on `stream`) is right too */
  orIgnored?: boolean
}

export interface H2Case {
  family: string
  /** what the family varied, for the report */
  variant: string
  /** on the https entry point (ALPN h2) instead of h2c */
  tls: boolean
  /** everything after the connection preface (the client's SETTINGS included) */
  bytes: Buffer
  /** half-close after sending (a truncated frame would otherwise wait for its missing bytes) */
  end: boolean
  /** streams that must be answered with their marker in the backend's body */
  served: number[]
  refusal: Refusal | null
  /** the largest request body the backend may get for this case (DATA beyond content-length) */
  maxBody: number | null
  /** a string that must not reach the backend in any field name or value */
  taint: string | null
  /** the case's index (for its markers) */
  index: number
}

type Fields = Array<[string, string]>
const HELLO = settings([[S.ENABLE_PUSH, 0], [S.INITIAL_WINDOW_SIZE, 1 << 20]])

export const path = (index: number, kind: 'ok' | 'never' | 'any', stream: number): string => `/fz/${index}/${kind}-${stream}`

function request (scheme: string, p: string, method = 'GET', extra: Fields = []): Fields {
  return [[':method', method], [':scheme', scheme], [':path', p], [':authority', 'fuzz.test'], ...extra]
}

/** a random lower-case field that no HTTP/2 rule forbids */
function randomField (rng: Rng): [string, string] {
  const chars = 'abcdefghijklmnopqrstuvwxyz0123456789-'
  let name = 'x-'
  for (let i = rng.range(1, 16); i > 0; i--) name += chars[rng.int(chars.length)]
  let value = rng.word(rng.pick([4, 40, 200]))
  if (rng.chance(0.2)) value = `${value} ${rng.word(8)}`
  return [name, value]
}

const CONN_FIELDS: Fields = [['connection', 'keep-alive'], ['keep-alive', 'timeout=5'], ['proxy-connection', 'keep-alive'],
  ['upgrade', 'websocket'], ['transfer-encoding', 'chunked'], ['te', 'gzip'], ['te', 'trailers, deflate']]

/** Malformed requests (RFC 9113 §8.1.1, §8.2, §8.3): each must be a stream error, never forwarded. */
function malformed (rng: Rng, scheme: string, p: string): [string, Fields] {
  const base = request(scheme, p)
  switch (rng.int(10)) {
    case 0: return ['no :path', base.filter(([k]) => k !== ':path')]
    case 1: return ['no :method', base.filter(([k]) => k !== ':method')]
    case 2: return ['no :scheme', base.filter(([k]) => k !== ':scheme')]
    case 3: return ['two :method', [[':method', 'GET'], [':method', 'POST'], ...base.slice(1)]]
    case 4: return ['pseudo after a field', [...base.filter(([k]) => k !== ':path'), ['x-a', 'b'], [':path', p]]]
    case 5: return ['unknown pseudo', [...base, [':foo', 'bar']]]
    case 6: return [':status in a request', [...base, [':status', '200']]]
    case 7: return ['upper-case name', [...base, ['X-' + rng.word(5).replace(/[^A-Za-z]/g, 'Q').toUpperCase(), 'v']]]
    case 8: { const f = rng.pick(CONN_FIELDS); return [`connection-specific ${f[0]}: ${f[1]}`, [...base, f]] }
    default: return ['empty :path', base.map(([k, v]) => [k, k === ':path' ? '' : v] as [string, string])]
  }
}

/**
 * A field whose name or value has a byte RFC 9113 §8.2.1 forbids. nghttp2
 * (node:http2) drops such a field and passes the rest of the request on (its
 * documented leniency: no on_invalid_header callback), so lb never sees it:
 * the request is served and the field (it carries `taint`) must not reach the
 * backend, where a ':' or CR LF would split it into other fields.
 */
function badField (rng: Rng, taint: string): [string, [string, string]] {
  if (rng.chance(0.5)) {
    const b = rng.pick([' ', ':', '\x00', '\x7f', '\t', '\x80'])
    return [`name with ${JSON.stringify(b)}`, [`x-${taint}${b}b`, 'v']]
  }
  const b = rng.pick(['\r', '\n', '\x00', '\r\nx-injected: 1'])
  return [`value with ${JSON.stringify(b)}`, ['x-v', `${taint}${b}b`]]
}

const FAMILIES = [
  'valid', 'valid', 'valid', 'pseudo', 'pseudo', 'bad-field', 'stream-id', 'idle-closed', 'padding', 'settings', 'window-update',
  'priority', 'continuation', 'hpack', 'header-limits', 'frame-size', 'truncated', 'rapid-reset', 'flood',
  'content-length', 'push-promise', 'garbage',
] as const

export function h2Case (rng: Rng, index: number): H2Case {
  const family = rng.pick(FAMILIES)
  const tls = rng.chance(0.2)
  const scheme = tls ? 'https' : 'http'
  const ok = (s: number): Buffer => headers(s, headerBlock(request(scheme, path(index, 'ok', s))), { endStream: true })
  const never = (s: number, extra: Fields = [], method = 'GET'): Buffer => headers(s, headerBlock(request(scheme, path(index, 'never', s), method, extra)), { endStream: true })
  const c: H2Case = { family, variant: '', tls, bytes: Buffer.alloc(0), end: false, served: [], refusal: null, maxBody: null, taint: null, index }
  const conn = (stream: number, ...codes: number[]): Refusal => ({ level: 'conn', stream, codes })
  const strm = (stream: number, ...codes: number[]): Refusal => ({ level: 'stream', stream, codes })
  const out = (variant: string, parts: Buffer[], o: Partial<H2Case> = {}): H2Case =>
    Object.assign(c, { variant, bytes: Buffer.concat([HELLO, ...parts]) }, o)

  switch (family) {
    case 'valid': {
      // several streams with random fields, bodies (with and without content-length), padding, CONTINUATION,
      // PRIORITY, WINDOW_UPDATE, PING and unknown frame types and settings (ignored, RFC 9113 §4.1, §5.5)
      const parts: Buffer[] = []
      const served: number[] = []
      const huff = rng.chance(0.4)
      for (let i = 0, s = 1; i < rng.range(1, 5); i++, s += 2) {
        const body = rng.chance(0.4) ? rng.word(rng.pick([10, 300])) : null
        const fields: Fields = Array.from({ length: rng.int(12) }, () => randomField(rng))
        if (body !== null && rng.chance(0.6)) fields.push(['content-length', String(body.length)])
        const block = headerBlock(request(scheme, path(index, 'ok', s), body === null ? 'GET' : rng.pick(['POST', 'PUT', 'PATCH']), fields), huff)
        const pad = rng.chance(0.2) ? rng.range(0, 40) : undefined
        if (rng.chance(0.3) && block.length > 4) {
          const cut = rng.range(1, block.length - 1)
          parts.push(headers(s, block.subarray(0, cut), { endStream: body === null, more: true, padding: pad }), frame(T.CONTINUATION, F.END_HEADERS, s, block.subarray(cut)))
        } else parts.push(headers(s, block, { endStream: body === null, padding: pad, priority: rng.chance(0.2) ? priorityBlock(0, rng.int(256)) : undefined }))
        if (rng.chance(0.2)) parts.push(frame(T.PRIORITY, 0, s + 100, priorityBlock(rng.pick([0, 1, 3]), rng.int(256))))
        if (rng.chance(0.2)) parts.push(windowUpdate(rng.pick([0, s]), rng.range(1, 1 << 20)))
        if (rng.chance(0.2)) parts.push(ping(rng.bytes(8)))
        if (rng.chance(0.2)) parts.push(frame(rng.range(0x0a, 0xff), rng.int(256), rng.pick([0, s]), rng.bytes(rng.int(30))))
        if (rng.chance(0.1)) parts.push(settings([[rng.range(7, 0xffff), rng.u32()]]))
        if (body !== null) parts.push(data(s, body, true, rng.chance(0.2) ? rng.range(0, 30) : undefined))
        served.push(s)
      }
      return out(`${served.length} streams${huff ? ', Huffman' : ''}`, parts, { served })
    }
    case 'pseudo': {
      const [variant, fields] = malformed(rng, scheme, path(index, 'never', 1))
      return out(variant, [headers(1, headerBlock(fields), { endStream: true }), ok(3)], { refusal: strm(1, E.PROTOCOL_ERROR), served: [3] })
    }
    case 'bad-field': {
      const [variant, f] = badField(rng, `fzbad${index}`)
      const block = headerBlock(request(scheme, path(index, 'ok', 1), 'GET', [f]))
      return out(variant, [headers(1, block, { endStream: true })], { served: [1], taint: `fzbad${index}` })
    }
    case 'stream-id': {
      switch (rng.int(5)) {
        case 0: { const s = rng.pick([2, 4, 100]); return out(`even stream ${s}`, [never(s)], { refusal: conn(s, E.PROTOCOL_ERROR) }) }
        case 1: return out('stream 0', [never(0)], { refusal: conn(0, E.PROTOCOL_ERROR) })
        // RFC 9113 §5.1.1 says PROTOCOL_ERROR; nghttp2 drops a HEADERS at or below the last stream id on purpose
        // (it may be trailers crossing a RST_STREAM): either way it is never forwarded
        case 2: return out('decreasing ids 5 then 3', [ok(5), never(3)], { refusal: { level: 'ignored', stream: 3, codes: [E.PROTOCOL_ERROR] } })
        // stream 1 is half-closed (remote) or closed once its request ended: a second HEADERS there is an error
        case 3: return out('stream 1 reused', [ok(1), never(1)], { refusal: conn(1, E.PROTOCOL_ERROR, E.STREAM_CLOSED) })
        default: return out('reserved bit set (ignored)', [headers(1, headerBlock(request(scheme, path(index, 'ok', 1))), { endStream: true }).fill(0x80, 5, 6)], { served: [1] })
      }
    }
    case 'idle-closed': {
      switch (rng.int(5)) {
        case 0: return out('DATA on an idle stream', [data(7, 'never', true)], { refusal: conn(7, E.PROTOCOL_ERROR, E.STREAM_CLOSED) })
        case 1: return out('WINDOW_UPDATE on an idle stream', [windowUpdate(9, 100)], { refusal: conn(9, E.PROTOCOL_ERROR) })
        case 2: return out('RST_STREAM on an idle stream', [rstStream(11, E.CANCEL)], { refusal: conn(11, E.PROTOCOL_ERROR) })
        case 3: return out('DATA after END_STREAM', [ok(1), data(1, 'never', true)], { refusal: strm(1, E.STREAM_CLOSED) })
        default: return out('PRIORITY on an idle stream (allowed)', [frame(T.PRIORITY, 0, 13, priorityBlock(0)), ok(1)], { served: [1] })
      }
    }
    case 'padding': {
      const block = headerBlock(request(scheme, path(index, 'never', 1)))
      if (rng.chance(0.5)) {
        const padLen = rng.range(block.length, 255) // padding as long as or longer than what follows it
        return out(`HEADERS pad length ${padLen} > payload`, [frame(T.HEADERS, F.END_HEADERS | F.END_STREAM | F.PADDED, 1, Buffer.concat([Buffer.from([padLen & 255]), block]))], { refusal: conn(1, E.PROTOCOL_ERROR) })
      }
      const head = headers(1, headerBlock(request(scheme, path(index, 'any', 1), 'POST')))
      return out('DATA pad length >= payload', [head, frame(T.DATA, F.PADDED | F.END_STREAM, 1, Buffer.from([rng.range(5, 255), 1, 2, 3, 4]))], { refusal: conn(1, E.PROTOCOL_ERROR) })
    }
    case 'settings': {
      const bad: Array<[string, Buffer, number]> = [
        ['ENABLE_PUSH 2', settings([[S.ENABLE_PUSH, rng.range(2, 1000)]]), E.PROTOCOL_ERROR],
        ['INITIAL_WINDOW_SIZE 2^31', settings([[S.INITIAL_WINDOW_SIZE, 2 ** 31 + rng.int(1000)]]), E.FLOW_CONTROL_ERROR],
        ['MAX_FRAME_SIZE below 16384', settings([[S.MAX_FRAME_SIZE, rng.int(16384)]]), E.PROTOCOL_ERROR],
        ['MAX_FRAME_SIZE above 2^24-1', settings([[S.MAX_FRAME_SIZE, 2 ** 24 + rng.int(1000)]]), E.PROTOCOL_ERROR],
        ['length not a multiple of 6', frame(T.SETTINGS, 0, 0, rng.bytes(rng.pick([1, 5, 7, 13]))), E.FRAME_SIZE_ERROR],
        ['on stream 1', settings([[S.MAX_CONCURRENT_STREAMS, 10]], 0, 1), E.PROTOCOL_ERROR],
        ['ACK with a payload', settings([[S.ENABLE_PUSH, 0]], F.ACK), E.FRAME_SIZE_ERROR],
      ]
      if (rng.chance(0.25)) {
        // unknown identifiers and odd but valid values: ignored or applied, then served
        const v = settings([[rng.range(7, 0xffff), rng.u32()], [S.HEADER_TABLE_SIZE, rng.pick([0, 1, 4096, 2 ** 32 - 1])], [S.MAX_CONCURRENT_STREAMS, rng.pick([0, 1, 2 ** 32 - 1])]])
        return out('unknown and odd settings', [v, ok(1)], { served: [1] })
      }
      const [variant, f, code] = rng.pick(bad)
      return out(variant, [f, never(1)], { refusal: conn(1, code) })
    }
    case 'window-update': {
      const head = headers(1, headerBlock(request(scheme, path(index, 'any', 1), 'POST')))
      switch (rng.int(5)) {
        case 0: return out('connection increment 0', [windowUpdate(0, 0), never(3)], { refusal: conn(3, E.PROTOCOL_ERROR) })
        case 1: return out('stream increment 0', [head, windowUpdate(1, 0), ok(3)], { refusal: strm(1, E.PROTOCOL_ERROR), served: [3] })
        case 2: return out('connection window past 2^31-1', [windowUpdate(0, 2 ** 31 - 1), never(3)], { refusal: conn(3, E.FLOW_CONTROL_ERROR) })
        case 3: return out('stream window past 2^31-1', [head, windowUpdate(1, 2 ** 31 - 1), windowUpdate(1, 2 ** 31 - 1), ok(3)], { refusal: strm(1, E.FLOW_CONTROL_ERROR), served: [3] })
        default: return out('length not 4', [frame(T.WINDOW_UPDATE, 0, 0, rng.bytes(rng.pick([0, 3, 5, 8]))), never(3)], { refusal: conn(3, E.FRAME_SIZE_ERROR) })
      }
    }
    case 'priority': {
      if (rng.chance(0.4)) return out('HEADERS depending on itself', [headers(1, headerBlock(request(scheme, path(index, 'never', 1))), { endStream: true, priority: priorityBlock(1) }), ok(3)], { refusal: strm(1, E.PROTOCOL_ERROR), served: [3] })
      // RFC 9113 deprecates the priority scheme (§5.3.2): the nghttp2 of Node 22 ignores PRIORITY frames, self-dependent
      // ones included (stream 1 stays idle); Node 20's resets the stream. Either is safe: nothing was requested.
      if (rng.chance(0.5)) return out('PRIORITY depending on itself', [frame(T.PRIORITY, 0, 1, priorityBlock(1, rng.int(256), rng.chance(0.5))), ok(3)], { refusal: { ...strm(1, E.PROTOCOL_ERROR), orIgnored: true }, served: [3] })
      return out('PRIORITY length not 5', [frame(T.PRIORITY, 0, 1, rng.bytes(rng.pick([0, 4, 6]))), ok(3)], { refusal: strm(1, E.FRAME_SIZE_ERROR), served: [3] })
    }
    case 'continuation': {
      const block = headerBlock(request(scheme, path(index, 'never', 1)))
      const cut = rng.range(1, block.length - 1)
      const first = headers(1, block.subarray(0, cut), { endStream: true, more: true })
      const rest = frame(T.CONTINUATION, F.END_HEADERS, 1, block.subarray(cut))
      switch (rng.int(4)) {
        case 0: return out('CONTINUATION without HEADERS', [rest], { refusal: conn(1, E.PROTOCOL_ERROR) })
        case 1: return out('HEADERS then PING before CONTINUATION', [first, ping(Buffer.alloc(8)), rest], { refusal: conn(1, E.PROTOCOL_ERROR) })
        case 2: return out('HEADERS then HEADERS of stream 3', [first, ok(3), rest], { refusal: conn(1, E.PROTOCOL_ERROR) })
        default: return out('CONTINUATION on another stream', [first, frame(T.CONTINUATION, F.END_HEADERS, 3, block.subarray(cut))], { refusal: conn(1, E.PROTOCOL_ERROR) })
      }
    }
    case 'hpack': {
      const good = headerBlock(request(scheme, path(index, 'never', 1)))
      const bad: Array<[string, Buffer]> = [
        ['index 0', Buffer.concat([good, Buffer.from([0x80])])],
        ['index past the tables', Buffer.concat([good, hpackInt(rng.range(62, 100_000), 7, 0x80)])],
        ['table size update past SETTINGS_HEADER_TABLE_SIZE', Buffer.concat([hpackInt(rng.range(4097, 2 ** 30), 5, 0x20), good])],
        ['table size update after a field', Buffer.concat([good, hpackInt(0, 5, 0x20)])],
        ['Huffman string with EOS', Buffer.concat([good, Buffer.from([0x00, 0x84, 0xff, 0xff, 0xff, 0xff, 0x01, 0x61])])],
        ['Huffman padding of zeros', Buffer.concat([good, Buffer.from([0x00, 0x81, 0x00, 0x01, 0x61])])],
        ['integer overflow', Buffer.concat([good, Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])])],
        ['string longer than the block', Buffer.concat([good, Buffer.from([0x00, 0x7f, 0xff, 0x01, 0x61])])],
      ]
      const [variant, block] = rng.pick(bad)
      return out(variant, [headers(1, block, { endStream: true })], { refusal: conn(1, E.COMPRESSION_ERROR) })
    }
    case 'header-limits': {
      // over max_header_list_size (64 KiB decoded) or max_header_pairs (128): refused, never forwarded
      const head = request(scheme, path(index, 'never', 1))
      let block: Buffer
      let variant: string
      const k = rng.int(3)
      if (k === 0) {
        variant = 'one 70 KiB value'
        block = Buffer.concat([headerBlock(head), literal('x-big', 'v'.repeat(70_000 + rng.int(10_000)))])
      } else if (k === 1) {
        variant = `${130 + rng.int(200)} fields`
        block = headerBlock([...head, ...Array.from({ length: 130 + rng.int(200) }, (_, i): [string, string] => [`x-f${i}`, 'v'])])
      } else {
        // HPACK bomb: one 4 KiB entry in the dynamic table, then referenced by a one-byte index hundreds of times
        variant = 'HPACK bomb (one entry indexed 500 times)'
        const entry = Buffer.concat([Buffer.from([0x40]), hpackString('x-bomb'), hpackString('b'.repeat(4000))])
        block = Buffer.concat([headerBlock(head), entry, Buffer.alloc(500, 0xbe)]) // 0xbe: index 62, the newest entry
      }
      const frames: Buffer[] = []
      for (let at = 0; at < block.length; at += 16_384) {
        const piece = block.subarray(at, at + 16_384)
        const last = at + 16_384 >= block.length
        frames.push(at === 0 ? headers(1, piece, { endStream: true, more: !last }) : frame(T.CONTINUATION, last ? F.END_HEADERS : 0, 1, piece))
      }
      return out(variant, [...frames, ok(3)], { refusal: strm(1, E.PROTOCOL_ERROR, E.INTERNAL_ERROR, E.ENHANCE_YOUR_CALM, E.REFUSED_STREAM, E.COMPRESSION_ERROR) })
    }
    case 'frame-size': {
      const n = 16_385 + rng.int(20_000)
      switch (rng.int(4)) {
        case 0: return out(`HEADERS of ${n} bytes`, [frame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, Buffer.concat([headerBlock(request(scheme, path(index, 'never', 1))), Buffer.alloc(n, 0x80)]).subarray(0, n))], { refusal: conn(1, E.FRAME_SIZE_ERROR) })
        case 1: return out(`DATA of ${n} bytes`, [headers(1, headerBlock(request(scheme, path(index, 'any', 1), 'POST'))), data(1, Buffer.alloc(n, 0x61), true)], { refusal: conn(1, E.FRAME_SIZE_ERROR) })
        case 2: return out('PING not 8 bytes', [ping(rng.bytes(rng.pick([0, 7, 9, 64])))], { refusal: conn(0, E.FRAME_SIZE_ERROR) })
        default: return out('RST_STREAM not 4 bytes', [ok(1), frame(T.RST_STREAM, 0, 1, rng.bytes(rng.pick([0, 3, 5])))], { refusal: conn(1, E.FRAME_SIZE_ERROR) })
      }
    }
    case 'truncated': {
      const whole = Buffer.concat([headers(1, headerBlock(request(scheme, path(index, 'any', 1), 'POST', [['content-length', '20']]))), data(1, 'x'.repeat(20), true)])
      const cut = rng.range(1, whole.length - 1)
      return out(`cut at byte ${cut} of ${whole.length}, then FIN`, [whole.subarray(0, cut)], { end: true })
    }
    case 'rapid-reset': {
      // CVE-2023-44487: streams opened and at once reset; past nghttp2's burst of 1000 the session ends
      const n = rng.pick([20, 200, 1500, 3000])
      const parts: Buffer[] = []
      for (let i = 0, s = 1; i < n; i++, s += 2) parts.push(headers(s, headerBlock(request(scheme, path(index, 'any', s))), { endStream: true }), rstStream(s, E.CANCEL))
      return out(`${n} streams opened and reset`, parts, { refusal: n > 1000 ? conn(0, E.ENHANCE_YOUR_CALM, E.INTERNAL_ERROR, E.PROTOCOL_ERROR) : null })
    }
    case 'flood': {
      const n = rng.pick([100, 2000, 10_000])
      const f = rng.chance(0.5) ? ping(Buffer.alloc(8, 7)) : settings([])
      return out(`${n} ${f[3] === T.PING ? 'PING' : 'SETTINGS'} frames`, [Buffer.concat(Array.from({ length: n }, () => f))])
    }
    case 'content-length': {
      const cl = rng.range(0, 20)
      const head = headers(1, headerBlock(request(scheme, path(index, 'any', 1), 'POST', [['content-length', String(cl)]])))
      const more = rng.range(1, 50)
      const body = rng.chance(0.5) ? [data(1, 'a'.repeat(cl + more), true)] : [data(1, 'a'.repeat(cl)), data(1, 'b'.repeat(more), true)]
      return out(`content-length ${cl}, ${cl + more} bytes sent`, [head, ...body, ok(3)], { refusal: strm(1, E.PROTOCOL_ERROR), maxBody: cl, served: [3] })
    }
    case 'push-promise':
      return out('PUSH_PROMISE from the client', [ok(1), frame(T.PUSH_PROMISE, F.END_HEADERS, 1, Buffer.concat([Buffer.from([0, 0, 0, 2]), headerBlock(request(scheme, path(index, 'never', 2)))]))], { refusal: conn(1, E.PROTOCOL_ERROR) })
    default:
      return out('random bytes', [rng.bytes(rng.range(1, 300))])
  }
}
