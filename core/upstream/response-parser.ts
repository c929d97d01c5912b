// Incremental HTTP/1.x response parser for upstream connections. It is fed the
// bytes of each socket read (a view into one shared read buffer, valid only
// during the call) and reports the head once and the body as views, never
// copying body bytes. Only a head split across reads is copied aside.
//
// Body framing (RFC 9112 §6.3): no body for HEAD, 1xx, 204, 304; chunked when
// Transfer-Encoding ends in chunked; else Content-Length; else until close.

import { eqLower, otherTokens } from '../net/token-list.js'
import { decimal, excerpt, isBlank, isHttpPrefix, isWide, lineEnd, statusCode, text } from './head-scan.js'

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
  /**
   * What was wrong, beside the reason feed() returned (which is one of a fixed
   * set, so it can key a log's rate limit): the value at fault, escaped and cut
   * short. Never a header's value, which may carry a secret. '' when none.
   */
  detail = ''

  /** Starts a new response; `isHead` = the request was HEAD (no body follows). */
  reset (sink: ResponseSink, isHead: boolean): void {
    this.#sink = sink
    this.#state = ST_HEAD
    this.#head = null
    this.#noBody = isHead
    this.#lineBuf = ''
    this.keepAlive = true
    this.bytes = 0
    this.detail = ''
  }

  /** The response head has been handed on (onHead): a failure now is one of the body. */
  get headDone (): boolean {
    return this.#state !== ST_HEAD
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
            if (this.#lineBuf.length > 4096) {
              this.detail = `over 4096 bytes: ${excerpt(this.#lineBuf)}`
              return this.#state === ST_TRAILERS ? 'trailer line too long' : 'invalid chunk size'
            }
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
          this.detail = `${end - start} bytes`
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
      if (line !== '') {
        this.detail = `${excerpt(line)} where the chunk's CRLF ends`
        return 'invalid chunk: no CRLF after its data'
      }
      this.#state = ST_CHUNK_SIZE
      return null
    }
    if (this.#state === ST_TRAILERS) {
      if (line === '') this.#finish()
      return null
    }
    const m = /^([0-9a-fA-F]{1,8})(?:;.*)?$/.exec(line)
    if (m === null) {
      this.detail = excerpt(line)
      return 'invalid chunk size'
    }
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
      // not a status line from its first bytes (a server that speaks something else): say so now, not at the time-out
      if (!isHttpPrefix(src, from, to)) {
        this.detail = excerpt(src.toString('latin1', from, Math.min(to, from + 64)))
        return 'invalid status line'
      }
      if (to - from > MAX_HEAD_BYTES) {
        this.detail = `over ${MAX_HEAD_BYTES} bytes`
        return 'response head too large'
      }
      this.#head = Buffer.from(src.subarray(from, to)) // copy: the read buffer is reused
      return -1
    }
    if (idx - from > MAX_HEAD_BYTES) {
      // the limit holds for a head whose end came in the same read as its 64 KiB-th byte too
      this.detail = `over ${MAX_HEAD_BYTES} bytes`
      return 'response head too large'
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
   * handed on are therefore free of line breaks (core/worker/transport/uws/client.ts relies on it).
   */
  #parseHead (head: string, end: number): string | null {
    let eol = lineEnd(head, 0, end)
    const status = eol < 0 ? -1 : statusCode(head, eol)
    if (status < 0) {
      this.detail = excerpt(head.slice(0, eol < 0 ? Math.min(end, 64) : eol))
      return 'invalid status line'
    }
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
      const colon = head.indexOf(':', pos)
      if (eol < 0 || colon <= pos || colon > eol || isBlank(head.charCodeAt(pos))) {
        // the line is not shown: it may hold (part of) a value, and a value may be a secret
        this.detail = eol < 0
          ? 'a bare CR or LF'
          : isBlank(head.charCodeAt(pos)) ? 'a folded line (obs-fold)' : colon === pos ? 'a line without a header name' : 'a line without a colon'
        return 'invalid header line'
      }
      let vs = colon + 1
      let ve = eol
      while (vs < ve && isBlank(head.charCodeAt(vs))) vs++
      while (ve > vs && isBlank(head.charCodeAt(ve - 1))) ve--
      const kind = dropKind(head, pos, colon - pos)
      if (kind === KEEP) {
        headers.push(head.slice(pos, colon), text(head, vs, ve, wide))
      } else if (kind === CONTENT_LENGTH) {
        const n = decimal(head, vs, ve)
        if (n < 0 || (contentLength >= 0 && n !== contentLength)) {
          this.detail = n < 0 ? excerpt(head.slice(vs, ve)) : `${contentLength} and ${n}`
          return n < 0 ? 'invalid Content-Length' : 'conflicting Content-Length headers'
        }
        contentLength = n
      } else if (kind === TRANSFER_ENCODING) {
        chunked = /(?:^|,)\s*chunked\s*$/i.test(head.slice(vs, ve))
        if (!chunked) {
          this.detail = excerpt(head.slice(vs, ve))
          return 'unsupported Transfer-Encoding'
        }
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
