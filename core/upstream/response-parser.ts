// Incremental HTTP/1.x response parser for upstream connections. It is fed the
// bytes of each socket read (a view into one shared read buffer, valid only
// during the call) and reports the head once and the body as views, never
// copying body bytes. Only a head split across reads is copied aside.
//
// Body framing (RFC 9112 §6.3): no body for HEAD, 1xx, 204, 304; chunked when
// Transfer-Encoding ends in chunked; else Content-Length; else until close.

import { eqLower, otherTokens } from '../net/token-list.js'

export interface ResponseSink {
  /**
   * headers: flat [name, value, ...] as received (values UTF-8-decoded), hop-by-hop (those named in
   * Connection too) and framing headers removed. contentLength: the body's length, or -1 when it is
   * chunked or close-delimited; for a response without a body (HEAD, 204, 304) the server's
   * Content-Length as sent (-1 when none; always -1 for 204, which must not carry one: RFC 9110 §8.6)
   */
  onHead (status: number, reason: string, headers: string[], contentLength: number): void
  /** a piece of body bytes buf[start, end); return false to stop reading after this read */
  onBody (buf: Buffer, start: number, end: number): boolean
  onEnd (): void
}

const ST_HEAD = 0
const ST_LENGTH = 1
const ST_CHUNK_SIZE = 2
const ST_CHUNK_DATA = 3
const ST_CHUNK_CRLF = 4
const ST_TRAILERS = 5
const ST_CLOSE = 6
const ST_DONE = 7

export const MAX_HEAD_BYTES = 64 * 1024

// Response headers a proxy must not forward (hop-by-hop, RFC 9110 §7.6.1) or
// that the client side writes itself (framing, Date): see dropKind().

/** bytes of a read searched for the end of the head as a string first: a typical head is a few hundred bytes, and a larger peek would copy body bytes for nothing */
const HEAD_PEEK = 1024
const HEAD_END = Buffer.from('\r\n\r\n')

export class ResponseParser {
  #state = ST_DONE
  #sink: ResponseSink | null = null
  #head: Buffer | null = null // partial head carried over between reads
  #remaining = 0 // bytes left in a Content-Length body or the current chunk
  #noBody = false
  #lineBuf = '' // partial chunk-size / trailer line
  /** the connection may carry another request after this response: false when the server asked to close, spoke HTTP/1.0 without keep-alive, or delimits the body by closing */
  keepAlive = true
  /** bytes of the current response seen so far (head and body) */
  bytes = 0

  /** Starts a new response; `isHead` = the request was HEAD (no body follows). */
  reset (sink: ResponseSink, isHead: boolean): void {
    this.#sink = sink
    this.#state = ST_HEAD
    this.#head = null
    this.#noBody = isHead
    this.#lineBuf = ''
    this.keepAlive = true
    this.bytes = 0
  }

  /** Feeds bytes; returns an error message for a malformed response, else null. */
  feed (buf: Buffer, start: number, end: number): string | null {
    this.bytes += end - start
    while (start < end) {
      switch (this.#state) {
        case ST_HEAD: {
          const r = this.#feedHead(buf, start, end)
          if (typeof r === 'string') return r
          if (r < 0) return null
          start = r
          break
        }
        case ST_LENGTH: {
          const n = Math.min(this.#remaining, end - start)
          this.#remaining -= n
          const more = this.#sink!.onBody(buf, start, start + n)
          start += n
          if (this.#remaining === 0) this.#finish()
          if (!more && start >= end) return null
          break
        }
        case ST_CLOSE:
          this.#sink!.onBody(buf, start, end)
          return null
        case ST_CHUNK_SIZE:
        case ST_CHUNK_CRLF:
        case ST_TRAILERS: {
          const nl = buf.indexOf(10, start)
          if (nl < 0 || nl >= end) {
            this.#lineBuf += buf.toString('latin1', start, end)
            if (this.#lineBuf.length > 4096) return 'chunk line too long'
            return null
          }
          const line = (this.#lineBuf + buf.toString('latin1', start, nl)).replace(/\r$/, '')
          this.#lineBuf = ''
          start = nl + 1
          const err = this.#chunkLine(line)
          if (err !== null) return err
          break
        }
        case ST_CHUNK_DATA: {
          const n = Math.min(this.#remaining, end - start)
          this.#remaining -= n
          this.#sink!.onBody(buf, start, start + n)
          start += n
          if (this.#remaining === 0) this.#state = ST_CHUNK_CRLF
          break
        }
        case ST_DONE:
          return 'data after the end of the response'
      }
    }
    return null
  }

  /** The connection closed: ends a close-delimited body; returns false if the response was cut short. */
  close (): boolean {
    if (this.#state === ST_CLOSE) {
      this.#finish()
      return true
    }
    return this.#state === ST_DONE
  }

  #chunkLine (line: string): string | null {
    if (this.#state === ST_CHUNK_CRLF) {
      if (line !== '') return 'missing CRLF after chunk'
      this.#state = ST_CHUNK_SIZE
      return null
    }
    if (this.#state === ST_TRAILERS) {
      if (line === '') this.#finish()
      return null
    }
    const m = /^([0-9a-fA-F]{1,8})(?:;.*)?$/.exec(line)
    if (m === null) return 'invalid chunk size'
    const size = parseInt(m[1]!, 16)
    if (size === 0) this.#state = ST_TRAILERS
    else {
      this.#remaining = size
      this.#state = ST_CHUNK_DATA
    }
    return null
  }

  #finish (): void {
    this.#state = ST_DONE
    this.#sink!.onEnd()
  }

  /** Returns the offset after the head, -1 if more bytes are needed, or an error. */
  #feedHead (buf: Buffer, start: number, end: number): number | string {
    if (this.#head === null) {
      // the common case, a whole head in this read: one latin1 copy of its start, searched as a string
      const text = buf.toString('latin1', start, Math.min(end, start + HEAD_PEEK))
      const idx = text.indexOf('\r\n\r\n')
      if (idx >= 0) {
        const err = this.#parseHead(text, idx)
        return err ?? start + idx + 4
      }
    }
    let src = buf
    let from = start
    let to = end
    if (this.#head !== null) {
      src = Buffer.concat([this.#head, buf.subarray(start, end)])
      from = 0
      to = src.length
    }
    const idx = src.indexOf(HEAD_END, from)
    if (idx < 0 || idx + 4 > to) {
      if (to - from > MAX_HEAD_BYTES) return 'response head too large'
      this.#head = Buffer.from(src.subarray(from, to)) // copy: the read buffer is reused
      return -1
    }
    const consumedFromBuf = this.#head === null ? idx + 4 : end - (to - (idx + 4))
    this.#head = null
    const text = src.toString('latin1', from, idx)
    const err = this.#parseHead(text, text.length)
    if (err !== null) return err
    return consumedFromBuf
  }

  /**
   * Parses head[0, end) (the head without its final CRLF CRLF) by scanning the
   * string: no split, no regular expression, and a name is compared with the
   * framing and hop-by-hop names only when its length matches one. Every line
   * must end in CRLF, and a bare CR or LF anywhere is an error: header values
   * handed on are therefore free of line breaks (core/worker/transport/http.ts relies on it).
   */
  #parseHead (head: string, end: number): string | null {
    let eol = lineEnd(head, 0, end)
    if (eol < 0) return 'invalid status line'
    const status = statusCode(head, eol)
    if (status < 0) return 'invalid status line'
    const http10 = head.charCodeAt(7) === 48
    // head is latin1 (one char per byte, so offsets are byte offsets); text handed on is
    // UTF-8-decoded, as uWS decodes requests and encodes what it writes. Almost every
    // head is ASCII, where the two agree: one scan decides whether values need decoding. It
    // covers all of `head`, which may run on into body bytes: a non-ASCII body then only
    // costs a check of each value (text()), while slicing the head off first costs every response.
    const wide = isWide(head)
    const reason = eol > 13 ? text(head, 13, eol, wide) : ''
    const headers: string[] = []
    let contentLength = -1
    let chunked = false
    let connection = ''
    for (let pos = eol + 2; pos < end; pos = eol + 2) {
      eol = lineEnd(head, pos, end)
      if (eol < 0) return 'invalid header line'
      const colon = head.indexOf(':', pos)
      if (colon <= pos || colon > eol || isBlank(head.charCodeAt(pos))) return 'invalid header line' // no name, or obs-fold
      let vs = colon + 1
      let ve = eol
      while (vs < ve && isBlank(head.charCodeAt(vs))) vs++
      while (ve > vs && isBlank(head.charCodeAt(ve - 1))) ve--
      const kind = dropKind(head, pos, colon - pos)
      if (kind === KEEP) {
        headers.push(head.slice(pos, colon), text(head, vs, ve, wide))
      } else if (kind === CONTENT_LENGTH) {
        const n = decimal(head, vs, ve)
        if (n < 0 || (contentLength >= 0 && n !== contentLength)) return 'invalid content-length'
        contentLength = n
      } else if (kind === TRANSFER_ENCODING) {
        chunked = /(?:^|,)\s*chunked\s*$/i.test(head.slice(vs, ve))
        if (!chunked) return 'unsupported transfer-encoding'
      } else if (kind === CONNECTION) {
        const v = head.slice(vs, ve).toLowerCase()
        connection = connection === '' ? v : connection + ', ' + v
      }
    }
    if (connection !== '') dropConnectionNamed(headers, connection)
    if (status < 200) {
      // interim response (100 Continue, 103 Early Hints): skip it, the real head follows
      this.#head = null
      this.#state = ST_HEAD
      return null
    }
    this.keepAlive = http10 ? connection.includes('keep-alive') : !connection.includes('close')
    const noBody = this.#noBody || status === 204 || status === 304
    if (noBody) {
      this.#sink!.onHead(status, reason, headers, status === 204 ? -1 : this.#noBody || status === 304 ? contentLength : 0)
      this.#finish()
    } else if (chunked) {
      this.#state = ST_CHUNK_SIZE
      this.#sink!.onHead(status, reason, headers, -1)
    } else if (contentLength >= 0) {
      this.#remaining = contentLength
      this.#state = ST_LENGTH
      this.#sink!.onHead(status, reason, headers, contentLength)
      if (contentLength === 0) this.#finish()
    } else {
      this.keepAlive = false
      this.#state = ST_CLOSE
      this.#sink!.onHead(status, reason, headers, -1)
    }
    return null
  }
}

const NOT_NAMES = ['close', 'keep-alive']

/** Removes from `headers` every header the Connection value names: they are hop-by-hop (RFC 9110 §7.6.1). */
function dropConnectionNamed (headers: string[], connection: string): void {
  const names = otherTokens(connection, NOT_NAMES)
  if (names === null) return
  for (let j = headers.length - 2; j >= 0; j -= 2) {
    const k = headers[j]!
    if (names.includes(k.toLowerCase())) headers.splice(j, 2)
  }
}

/** End of the line starting at `pos` (the index of its CR, or `end` for the last line); -1 if it holds a bare CR or LF. */
function lineEnd (s: string, pos: number, end: number): number {
  let eol = s.indexOf('\r', pos)
  if (eol < 0 || eol > end) eol = end
  else if (eol < end && s.charCodeAt(eol + 1) !== 10) return -1
  const lf = s.indexOf('\n', pos)
  return lf >= 0 && lf < eol ? -1 : eol
}

/** The status code of a status line s[0, eol) "HTTP/1.x NNN[ reason]", or -1. */
function statusCode (s: string, eol: number): number {
  if (eol < 12 || !s.startsWith('HTTP/1.') || s.charCodeAt(8) !== 32 || (eol > 12 && s.charCodeAt(12) !== 32)) return -1
  const minor = s.charCodeAt(7)
  if (minor !== 48 && minor !== 49) return -1
  const a = s.charCodeAt(9) - 48
  const b = s.charCodeAt(10) - 48
  const c = s.charCodeAt(11) - 48
  if (a < 0 || a > 9 || b < 0 || b > 9 || c < 0 || c > 9) return -1
  return a * 100 + b * 10 + c
}

function isBlank (c: number): boolean { return c === 32 || c === 9 }

/**
 * The latin1 string holds a byte above 0x7f: its UTF-8 length then exceeds its
 * length. Buffer.byteLength is one native call: about 35 ns for a 140-byte head,
 * against about 135 ns for a regular expression scan of it.
 */
function isWide (s: string): boolean {
  return Buffer.byteLength(s, 'utf8') !== s.length
}

/**
 * s[from, to) of a latin1 head as text: its bytes UTF-8-decoded when `wide`
 * and non-ASCII. Bytes that are not UTF-8 (obsolete latin1 text) become U+FFFD.
 */
function text (s: string, from: number, to: number, wide: boolean): string {
  const v = s.slice(from, to)
  return wide && isWide(v) ? Buffer.from(v, 'latin1').toString('utf8') : v
}

/** A non-negative decimal s[from, to) of at most 15 digits, or -1. */
function decimal (s: string, from: number, to: number): number {
  if (to <= from || to - from > 15) return -1
  let n = 0
  for (let i = from; i < to; i++) {
    const d = s.charCodeAt(i) - 48
    if (d < 0 || d > 9) return -1
    n = n * 10 + d
  }
  return n
}

const KEEP = 0
const CONTENT_LENGTH = 1
const TRANSFER_ENCODING = 2
const CONNECTION = 3
const OTHER_DROP = 4

/** What to do with the header named s[pos, pos + len): kept, or one of the dropped kinds. */
function dropKind (s: string, pos: number, len: number): number {
  switch (len) {
    case 2: return eqLower(s, pos, 'te') ? OTHER_DROP : KEEP
    case 4: return eqLower(s, pos, 'date') ? OTHER_DROP : KEEP
    case 7: return eqLower(s, pos, 'trailer') || eqLower(s, pos, 'upgrade') ? OTHER_DROP : KEEP
    case 10: return eqLower(s, pos, 'connection') ? CONNECTION : eqLower(s, pos, 'keep-alive') ? OTHER_DROP : KEEP
    case 14: return eqLower(s, pos, 'content-length') ? CONTENT_LENGTH : KEEP
    case 16: return eqLower(s, pos, 'proxy-connection') ? OTHER_DROP : KEEP
    case 17: return eqLower(s, pos, 'transfer-encoding') ? TRANSFER_ENCODING : KEEP
    default: return KEEP
  }
}
