// A uWS request's client side (ClientResponse): it attaches onAborted at once, corks every write made outside the
// request callback, and streams bodies with tryEnd/onWritable (known length) or write (chunked), backpressure
// reported to the caller; a WebSocket upgrade request's client also accepts the upgrade (WebSocketUpgrade).
import type { HttpResponse, us_socket_context_t } from 'uWebSockets.js'
import { type AtTurnEnd, atTurnEnd } from '../../../net/turn.js'
import { ClientState } from '../client-state.js'
import { STAGING, stage } from '../body-staging.js'
import type { ClientResponse } from '../client.js'
import type { Ctx } from '../../request/context.js'
import type { RequestHandler, SentCounter } from '../listen-options.js'
import { expectsBody } from '../request-read.js'
import { UWS_NO_LENGTH, headText, uwsLength } from '../response-head.js'
import type { WebSocketUpgrade, WsSession } from '../../ws/ws-client.js'
import { underAnchor } from './cork-anchor.js'

/** What each uWS WebSocket carries: the session its events go to. */
export interface WsUserData { readonly session: WsSession }

export class UwsClient extends ClientState implements ClientResponse, WebSocketUpgrade, AtTurnEnd {
  readonly #res: HttpResponse
  readonly websocket: WebSocketUpgrade | null
  /** the WebSocket route's context, needed by res.upgrade; null for plain requests */
  readonly #wsContext: us_socket_context_t | null

  constructor (res: HttpResponse, ctx: Ctx, sent: SentCounter | null, wsContext: us_socket_context_t | null = null) {
    super(ctx.method === 'HEAD', ctx.asksClose, ctx.chunked, sent)
    this.#res = res
    this.#wsContext = wsContext
    this.websocket = wsContext === null ? null : this
    res.onAborted(() => this.gone())
    // an answer that closes is not sent from inside uWS's data callback either: see inCallback
    if (expectsBody(ctx)) res.onData((ab, last) => { this.inCallback = true; this.received(ab, last); this.inCallback = false })
  }

  /** Inside the cork, before the write that completes the answer: see chunkedBody. */
  #lastWrite (): void {
    if (this.chunkedBody && this.bodyDone) this.#res.pause()
  }

  pauseBody (): void {
    if (this.aborted || this.ended) return
    this.bodyPaused = true
    this.#res.pause()
  }

  resumeBody (): void {
    if (this.aborted || this.ended || !this.bodyPaused) return
    this.bodyPaused = false
    this.#res.resume()
  }

  body (buf: Buffer, start: number, end: number): boolean {
    if (this.aborted || this.ended) return true
    if (this.pending !== null) {
      this.pending.push(Buffer.from(buf.subarray(start, end)))
      return false
    }
    if (this.hasHead && end - start === this.total) {
      // the whole body in one piece (the common small response): head and body in one write,
      // staged for the end of the turn when it fits there
      this.resumeBody()
      this.ended = true
      this.stagedAt = stage(buf, start, end)
      if (this.stagedAt >= 0) atTurnEnd(this)
      else this.#writeWhole(buf.subarray(start, end))
      return true
    }
    let ok = true
    this.#res.cork(() => {
      const res = this.#res
      this.#flushHead()
      const view = buf.subarray(start, end)
      if (this.total < 0) {
        this.countChunk(view.length)
        ok = res.write(view)
        return
      }
      this.countLength()
      const offset = res.getWriteOffset()
      if (offset + view.length >= this.total) this.#lastWrite()
      const [sent, done] = res.tryEnd(view, this.total)
      if (done) this.ended = true
      else if (!sent) {
        ok = false
        this.pending = [Buffer.from(view)]
        this.pendingOffset = offset
      }
    })
    if (!ok) this.#watchWritable()
    return ok
  }

  turnEnd (): void {
    if (!this.aborted) this.#writeWhole(STAGING.subarray(this.stagedAt, this.stagedAt + this.total))
  }

  /** The deferred head and the whole body, ending the response, in one corked write; uWS closes a chunked body's connection after it. */
  #writeWhole (body: Buffer): void {
    this.#res.cork(() => {
      const close = this.chunkedBody
      this.#lastWrite()
      this.#flushHead(close)
      this.count(uwsLength(body.length))
      this.#res.end(body, close)
    })
  }

  /** Writes the deferred head if there is one (corked); `uwsCloses`: see takeHead. */
  #flushHead (uwsCloses = false): void { if (this.hasHead) this.#res.writeStatus(this.takeHead(-1, uwsCloses)) }

  #watchWritable (): void {
    this.#res.onWritable((offset) => {
      if (this.aborted) return true
      const p = this.pending
      if (p !== null) {
        // tryEnd mode: resend from the first byte uWS did not take
        while (p.length > 0) {
          const chunk = p[0]!.subarray(offset - this.pendingOffset)
          if (offset + chunk.length >= this.total) this.#lastWrite()
          const [sent, done] = this.#res.tryEnd(chunk, this.total)
          if (done) {
            this.ended = true
            p.length = 0
            break
          }
          if (!sent) return false
          offset = this.#res.getWriteOffset()
          this.pendingOffset = offset
          p.shift()
        }
        this.pending = null
      }
      const cb = this.drainCb
      if (cb !== null) cb()
      return true
    })
  }

  end (): void {
    if (this.aborted || this.ended) return
    if (this.pending !== null) {
      // tryEnd completes the response by itself once the last pending byte is taken
      return
    }
    this.resumeBody()
    this.ended = true
    this.#res.cork(() => {
      const res = this.#res
      this.#lastWrite()
      if (this.bodiless()) {
        res.writeStatus(this.takeHead(this.total))
        this.count(UWS_NO_LENGTH)
        res.endWithoutBody()
        return
      }
      this.#flushHead()
      this.countEnd()
      res.end()
    })
  }

  send (status: number, headers: readonly string[], body: string, close = false): void {
    if (this.aborted || this.ended) return
    close ||= this.chunkedBody
    this.started = true
    this.resumeBody()
    this.ended = true
    if (close && this.inCallback) setImmediate(() => { if (!this.aborted) this.#sendNow(status, headers, body, true) })
    else this.#sendNow(status, headers, body, close)
  }

  #sendNow (status: number, headers: readonly string[], body: string, close: boolean): void {
    this.#res.cork(() => {
      const n = Buffer.byteLength(body)
      this.#lastWrite()
      this.#res.writeStatus(this.answerHead(status, headers, n, close))
      if (!this.headRequest) this.#res.end(body, close)
      else if (close) this.#res.endWithoutBody(n, close)
      else this.#res.endWithoutBody() // the length is in the head: see end()
    })
  }

  destroy (): void {
    if (this.aborted || this.ended) return
    this.ended = true
    this.#res.close()
  }

  /** Runs the data plane's handler inside uWS's request callback. */
  serve (handler: RequestHandler, ctx: Ctx): void {
    this.inCallback = true
    handler(ctx, this)
    this.inCallback = false
  }

  accept (session: WsSession, key: string, protocol: string, headers: readonly string[]): boolean {
    if (this.aborted || this.ended || this.#wsContext === null) return false
    this.started = true
    this.ended = true // the HttpResponse is gone once upgraded
    const ctx = this.#wsContext
    const upgrade = (): void => {
      const res = this.#res
      // custom headers on a 101 need the status written first (uWS docs)
      res.writeStatus(headText(101, '', headers, false, -1))
      // no extensions: permessage-deflate is never negotiated, so frames relay without recompression
      res.upgrade<WsUserData>({ session }, key, protocol, '', ctx)
    }
    // see cork-anchor.ts: with the anchor corked, res.cork runs `upgrade` without corking res
    underAnchor(() => this.#res.cork(upgrade))
    return true
  }
}
