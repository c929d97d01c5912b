// HPACK (RFC 7541) for the h2 fuzz surface, by hand: node:http2 exposes no
// encoder or decoder. The encoder writes what a fuzzer needs to control byte
// for byte (literals without indexing, raw or Huffman strings, any integer,
// dynamic table size updates); the decoder reads what lb sends back (its
// nghttp2 encoder uses the dynamic table and Huffman), so a case can say which
// :status a stream got.

/** RFC 7541 Appendix A: index 1..61 */
const STATIC: ReadonlyArray<readonly [string, string]> = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''], ['etag', ''],
  ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''],
  ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''], ['last-modified', ''], ['link', ''],
  ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''], ['proxy-authorization', ''], ['range', ''],
  ['referer', ''], ['refresh', ''], ['retry-after', ''], ['server', ''], ['set-cookie', ''],
  ['strict-transport-security', ''], ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''],
  ['www-authenticate', ''],
]
export const STATIC_SIZE = STATIC.length

/**
 * RFC 7541 Appendix B, the code length of symbols 0..255 (EOS, 256, is 30 ones).
 * The code is canonical: codes ascend with (length, symbol), so the lengths
 * alone rebuild it (checked against the RFC's first codes in h2.test.ts).
 */
const LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
]

/** canonical codes of symbols 0..256 */
export const HUFFMAN_CODES: readonly number[] = (() => {
  const order = LENGTHS.map((n, sym) => ({ n, sym })).sort((a, b) => a.n - b.n || a.sym - b.sym)
  const codes: number[] = new Array(LENGTHS.length).fill(0)
  let code = 0
  let len = order[0]!.n
  for (const { n, sym } of order) {
    code *= 2 ** (n - len) // shift left without 32-bit overflow
    len = n
    codes[sym] = code++
  }
  return codes
})()

/** "length|code" → symbol, for decoding bit by bit */
const DECODE = new Map<string, number>(HUFFMAN_CODES.map((c, sym) => [`${LENGTHS[sym]}|${c}`, sym]))

export function huffmanEncode (s: Buffer): Buffer {
  let bits = ''
  for (const b of s) bits += HUFFMAN_CODES[b]!.toString(2).padStart(LENGTHS[b]!, '0')
  bits += '1'.repeat((8 - (bits.length % 8)) % 8) // padding: the EOS prefix
  const out = Buffer.alloc(bits.length / 8)
  for (let i = 0; i < out.length; i++) out[i] = parseInt(bits.slice(i * 8, i * 8 + 8), 2)
  return out
}

/** null: not a valid Huffman string (EOS inside, padding over 7 bits or not all ones) */
export function huffmanDecode (b: Buffer): Buffer | null {
  const out: number[] = []
  let code = 0
  let len = 0
  for (const byte of b) {
    for (let i = 7; i >= 0; i--) {
      code = code * 2 + ((byte >> i) & 1)
      len++
      const sym = DECODE.get(`${len}|${code}`)
      if (sym === 256) return null
      if (sym !== undefined) { out.push(sym); code = 0; len = 0 }
      if (len > 30) return null
    }
  }
  if (len > 7 || code !== 2 ** len - 1) return null
  return Buffer.from(out)
}

/** An HPACK integer with an N-bit prefix; `flags` are the first byte's bits above the prefix. */
export function hpackInt (value: number, prefix: number, flags = 0): Buffer {
  const max = 2 ** prefix - 1
  if (value < max) return Buffer.from([flags | value])
  const out = [flags | max]
  let v = value - max
  while (v >= 128) { out.push((v % 128) + 128); v = Math.floor(v / 128) }
  out.push(v)
  return Buffer.from(out)
}

export function hpackString (s: Buffer | string, huffman = false): Buffer {
  const raw = typeof s === 'string' ? Buffer.from(s, 'latin1') : s
  const body = huffman ? huffmanEncode(raw) : raw
  return Buffer.concat([hpackInt(body.length, 7, huffman ? 0x80 : 0), body])
}

/** Literal Header Field without Indexing, new name (RFC 7541 §6.2.2): the encoder state never changes. */
export function literal (name: string, value: string, huffman = false): Buffer {
  return Buffer.concat([Buffer.from([0x00]), hpackString(name, huffman), hpackString(value, huffman)])
}

/** A header block of literals without indexing. */
export function headerBlock (fields: ReadonlyArray<readonly [string, string]>, huffman = false): Buffer {
  return Buffer.concat(fields.map(([n, v]) => literal(n, v, huffman)))
}

/** The decoder of one connection's header blocks from lb (one dynamic table, in order). */
export class HpackDecoder {
  #table: Array<[string, string]> = []
  #size = 0
  #max = 4096

  /** The fields of a whole header block; null when it does not decode. */
  decode (b: Buffer): Array<[string, string]> | null {
    const out: Array<[string, string]> = []
    let at = 0
    const int = (prefix: number): number | null => {
      if (at >= b.length) return null
      const max = 2 ** prefix - 1
      let v = b[at++]! & max
      if (v < max) return v
      for (let m = 1; at < b.length; m *= 128) {
        const c = b[at++]!
        v += (c & 127) * m
        if ((c & 128) === 0) return v
      }
      return null
    }
    const str = (): string | null => {
      if (at >= b.length) return null
      const h = (b[at]! & 0x80) !== 0
      const n = int(7)
      if (n === null || at + n > b.length) return null
      const raw = b.subarray(at, at + n)
      at += n
      const s = h ? huffmanDecode(raw) : raw
      return s === null ? null : s.toString('latin1')
    }
    const entry = (i: number): readonly [string, string] | null =>
      i >= 1 && i <= STATIC_SIZE ? STATIC[i - 1]! : (this.#table[i - STATIC_SIZE - 1] ?? null)
    while (at < b.length) {
      const c = b[at]!
      if (c & 0x80) {
        const e = entry(int(7) ?? 0)
        if (e === null) return null
        out.push([e[0], e[1]])
      } else if ((c & 0xe0) === 0x20) {
        const n = int(5)
        if (n === null) return null
        this.#max = n
        this.#evict(0)
      } else {
        const indexing = (c & 0xc0) === 0x40
        const idx = int(indexing ? 6 : 4)
        if (idx === null) return null
        const name = idx === 0 ? str() : (entry(idx)?.[0] ?? null)
        const value = str()
        if (name === null || value === null) return null
        out.push([name, value])
        const size = name.length + value.length + 32
        if (indexing) {
          // an entry larger than the table empties it and is not added (RFC 7541 §4.4)
          this.#evict(size)
          if (size <= this.#max) {
            this.#table.unshift([name, value])
            this.#size += size
          }
        }
      }
    }
    return out
  }

  /** makes room for `need` bytes (RFC 7541 §4.4) */
  #evict (need: number): void {
    while (this.#table.length > 0 && this.#size + need > this.#max) {
      const [n, v] = this.#table.pop()!
      this.#size -= n.length + v.length + 32
    }
  }
}
