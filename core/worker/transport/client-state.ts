// The state of the client side of one request that needs no uWS: what the
// client's events set, the request body that arrived before anyone read it,
// the response head held back until its body, and the bytes uWS adds to what
// lb writes (response-head.ts). UwsClient (core/worker/transport/uws/client.ts, the only
// module that touches uWS) extends it with the calls into uWS; one object per
// request, as before the split.
import type { SentCounter } from './listen-options.js'
import { UWS_CHUNKED, UWS_CLOSE, UWS_HEAD, UWS_LAST_CHUNK, UWS_NO_LENGTH, headText, uwsChunk, uwsLength } from './response-head.js'

const EMPTY: readonly string[] = []

export class ClientState {
  /** the client went away; nothing may be written any more */
  aborted = false
  /** a response was started (head written or queued) */
  started = false
  /** the response is complete (or handed over: an upgrade, a staged body) */
  protected ended = false
  #abortCb: (() => void) | null = null
  /** request body reading is paused (upstream backpressure); resumed before the response ends so uWS can drain the rest */
  protected bodyPaused = false
  #bodyCb: ((chunk: Buffer, last: boolean) => void) | null = null
  #early: Array<{ chunk: Buffer, last: boolean }> | null = null
  protected drainCb: (() => void) | null = null
  /** trailer fields of a chunked request body (flat, names lower-case), set before its last chunk is delivered; null: none */
  trailers: readonly string[] | null = null
  // response body state
  protected total = -1 // Content-Length being streamed with tryEnd, or -1 for chunked writes
  /** response head deferred until the first body bytes or the end */
  protected hasHead = false
  protected headStatus = 0
  protected headReason = ''
  protected headHeaders: readonly string[] = EMPTY
  protected pending: Buffer[] | null = null // tryEnd mode: copies not yet accepted by uWS
  protected pendingOffset = 0 // write offset at which pending[0] starts
  /** the whole body, staged for the end of the turn (body-staging.ts): STAGING[stagedAt, stagedAt + total) */
  protected stagedAt = -1
  /**
   * The data plane's handler is running inside uWS's request callback. An
   * answer that closes the connection is not sent from there: uWS goes on
   * parsing what the client already sent after this request and would hand lb
   * the next request even though this answer closes the connection (a
   * smuggled request after a framing error). Answered on the next turn
   * instead, with this response still pending, uWS reads nothing more: it ends
   * the connection itself when another request follows in those bytes (no
   * answer then, nothing forwarded), and closes it right after this answer otherwise.
   */
  protected inCallback = false
  protected readonly headRequest: boolean
  /** the request said Connection: close */
  protected readonly asksClose: boolean
  /**
   * The request had a chunked body: its connection serves nothing after this
   * answer. uWS 20.57 reads chunk-size lines leniently (" 24" is size 0), so
   * the rest of a malformed body is parsed as a new request on the same
   * connection, and lb never sees the raw bytes to tell. Contained (README,
   * "Chunked request bodies"): the answer says "connection: close" and closes
   * it; it is never completed inside a uWS callback, since uWS refuses what it
   * parses while an answer is pending; and once uWS has ended the body, it
   * reads nothing more from the connection from the answer's last write on
   * (uWS goes on parsing while it drains a closing answer the client is slow
   * to read). An answer made before the body ended does not stop the reading,
   * so uWS can take in the rest of the body and the client can read the
   * answer before the close (a reset otherwise).
   */
  protected readonly chunkedBody: boolean
  /** uWS has delivered the last byte of the request body (as it framed it) */
  protected bodyDone = false
  readonly #sent: SentCounter | null
  /** uWS wrote the head's framing line (Transfer-Encoding or Content-Length) */
  #framed = false

  constructor (headRequest: boolean, asksClose: boolean, chunkedBody: boolean, sent: SentCounter | null) {
    this.headRequest = headRequest
    this.asksClose = asksClose
    this.chunkedBody = chunkedBody
    this.#sent = sent
  }

  onAbort (cb: () => void): void { this.#abortCb = cb }

  /** uWS says the client went away. */
  protected gone (): void {
    this.aborted = true
    const cb = this.#abortCb
    this.#abortCb = null
    if (cb !== null && !this.ended) cb()
  }

  /** A request body chunk from uWS; `ab` is neutered when the uWS callback returns. */
  protected received (ab: ArrayBuffer, last: boolean): void {
    if (last) this.bodyDone = true
    const cb = this.#bodyCb
    if (cb !== null) {
      cb(Buffer.from(ab), last)
      return
    }
    // no consumer yet (a middleware is still deciding): keep a copy
    ;(this.#early ??= []).push({ chunk: Buffer.from(ab.slice(0)), last })
  }

  onBody (cb: (chunk: Buffer, last: boolean) => void): void {
    this.#bodyCb = cb
    const early = this.#early
    this.#early = null
    if (early !== null) for (const e of early) cb(e.chunk, e.last)
  }

  head (status: number, reason: string, headers: readonly string[], contentLength: number): void {
    this.started = true
    this.total = contentLength
    // Deferred until the first body bytes or the end, so that a small response
    // goes out as one corked write (status, headers and body together).
    this.hasHead = true
    this.headStatus = status
    this.headReason = reason
    this.headHeaders = headers
  }

  onDrain (cb: () => void): void { this.drainCb = cb }

  bodyBytes (body: string): number {
    return this.aborted || this.ended || this.headRequest ? 0 : Buffer.byteLength(body)
  }

  /**
   * The deferred head's text for uWS's writeStatus, counted: it is written
   * now. `length` >= 0: a Content-Length line (no body follows). `uwsCloses`:
   * the write that follows is end(body, true), which writes "Connection: close"
   * itself unless the request asked for the close; otherwise the head says so
   * when the connection closes after this answer.
   */
  protected takeHead (length: number, uwsCloses = false): string {
    this.hasHead = false
    const close = this.asksClose || (this.chunkedBody && !uwsCloses)
    const head = headText(this.headStatus, this.headReason, this.headHeaders, close, length)
    this.headHeaders = EMPTY
    this.count(head.length + UWS_HEAD + (uwsCloses && !this.asksClose ? UWS_CLOSE : 0))
    return head
  }

  /**
   * The head of a whole answer (UwsClient.send) of `bodyBytes`, counted with
   * what uWS adds: a HEAD answer that keeps the connection has its length in
   * the head (see UwsClient.end); `close` makes uWS write "Connection: close"
   * itself, unless the client asked for the close.
   */
  protected answerHead (status: number, headers: readonly string[], bodyBytes: number, close: boolean): string {
    if (this.headRequest && !close) {
      const head = headText(status, '', headers, this.asksClose, bodyBytes)
      this.count(head.length + UWS_HEAD + UWS_NO_LENGTH)
      return head
    }
    const head = headText(status, '', headers, this.asksClose, -1)
    this.count(head.length + UWS_HEAD + (close && !this.asksClose ? UWS_CLOSE : 0) + uwsLength(bodyBytes))
    return head
  }

  /**
   * The response ends with its deferred head and no body, and no
   * "Content-Length: 0" from uWS: a HEAD gets the length it was given, a 304
   * the server's if any, a 204 none (head() was given -1; RFC 9110 §8.6,
   * §15.4.5). The length goes in the head (takeHead): this build's
   * endWithoutBody(n) closes a keep-alive connection when n > 0.
   */
  protected bodiless (): boolean {
    return this.hasHead && (this.headRequest || this.headStatus === 204 || this.headStatus === 304)
  }

  /** Bytes about to be written beyond the body; called before the write, inside the cork. */
  protected count (bytes: number): void {
    if (this.#sent !== null) this.#sent.add(bytes)
  }

  /** Counts the framing of a chunk of n bytes about to be written with write() (chunked: no Content-Length). */
  protected countChunk (n: number): void {
    this.count((this.#framed ? 0 : UWS_CHUNKED) + uwsChunk(n))
    this.#framed = true
  }

  /** Counts the Content-Length line of the first tryEnd. */
  protected countLength (): void {
    if (!this.#framed) this.count(uwsLength(this.total))
    this.#framed = true
  }

  /** Counts what end() adds: the last chunk after write(); with nothing written "Content-Length: 0"; after tryEnd nothing. */
  protected countEnd (): void {
    if (this.total < 0 || !this.#framed) this.count(this.#framed ? UWS_LAST_CHUNK : uwsLength(0))
  }
}
