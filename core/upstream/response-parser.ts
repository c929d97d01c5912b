// Incremental HTTP/1.x response parser for upstream connections. It is fed the
// bytes of each socket read (a view into one shared read buffer, valid only
// during the call) and reports the head once and the body as views, never
// copying body bytes. Only a head split across reads is copied aside.
//
// Body framing (RFC 9112 §6.3): no body for HEAD, 1xx, 204, 304; chunked when
// Transfer-Encoding ends in chunked; else Content-Length; else until close.

export interface ResponseSink {
  /** headers: flat [name, value, ...] as received, hop-by-hop and framing headers removed */
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
// that the client side writes itself (framing, Date).
const DROP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length', 'date'])

export class ResponseParser {
  #state = ST_DONE
  #sink: ResponseSink | null = null
  #head: Buffer | null = null // partial head carried over between reads
  #remaining = 0 // bytes left in a Content-Length body or the current chunk
  #noBody = false
  #lineBuf = '' // partial chunk-size / trailer line
  /** the server asked to close, or spoke HTTP/1.0 without keep-alive */
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

  get done (): boolean { return this.#state === ST_DONE }
  /** true while the body is delimited by the connection closing */
  get untilClose (): boolean { return this.#state === ST_CLOSE }

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
    let src = buf
    let from = start
    let to = end
    if (this.#head !== null) {
      src = Buffer.concat([this.#head, buf.subarray(start, end)])
      from = 0
      to = src.length
    }
    const idx = src.indexOf('\r\n\r\n', from, 'latin1')
    if (idx < 0 || idx + 4 > to) {
      if (to - from > MAX_HEAD_BYTES) return 'response head too large'
      this.#head = Buffer.from(src.subarray(from, to)) // copy: the read buffer is reused
      return -1
    }
    const consumedFromBuf = this.#head === null ? idx + 4 : end - (to - (idx + 4))
    this.#head = null
    const err = this.#parseHead(src.toString('latin1', from, idx))
    if (err !== null) return err
    return consumedFromBuf
  }

  #parseHead (head: string): string | null {
    const lines = head.split('\r\n')
    const m = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/.exec(lines[0]!)
    if (m === null) return 'invalid status line'
    const status = Number(m[2])
    const http10 = m[1] === '0'
    const headers: string[] = []
    let contentLength = -1
    let chunked = false
    let connection = ''
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!
      const colon = line.indexOf(':')
      if (colon <= 0) return 'invalid header line'
      const name = line.slice(0, colon)
      const value = line.slice(colon + 1).trim()
      const lower = name.toLowerCase()
      if (DROP.has(lower)) {
        if (lower === 'content-length') {
          if (!/^\d+$/.test(value) || (contentLength >= 0 && Number(value) !== contentLength)) return 'invalid content-length'
          contentLength = Number(value)
        } else if (lower === 'transfer-encoding') {
          chunked = /(?:^|,)\s*chunked\s*$/i.test(value)
          if (!chunked) return 'unsupported transfer-encoding'
        } else if (lower === 'connection') connection = value.toLowerCase()
        continue
      }
      headers.push(name, value)
    }
    if (status < 200) {
      // interim response (100 Continue, 103 Early Hints): skip it, the real head follows
      this.#head = null
      this.#state = ST_HEAD
      return null
    }
    this.keepAlive = http10 ? connection.includes('keep-alive') : !connection.includes('close')
    const noBody = this.#noBody || status === 204 || status === 304
    if (noBody) {
      this.#sink!.onHead(status, m[3] ?? '', headers, this.#noBody ? contentLength : 0)
      this.#finish()
    } else if (chunked) {
      this.#state = ST_CHUNK_SIZE
      this.#sink!.onHead(status, m[3] ?? '', headers, -1)
    } else if (contentLength >= 0) {
      this.#remaining = contentLength
      this.#state = ST_LENGTH
      this.#sink!.onHead(status, m[3] ?? '', headers, contentLength)
      if (contentLength === 0) this.#finish()
    } else {
      this.keepAlive = false
      this.#state = ST_CLOSE
      this.#sink!.onHead(status, m[3] ?? '', headers, -1)
    }
    return null
  }
}
