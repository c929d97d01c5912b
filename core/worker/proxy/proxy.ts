// One proxied request: pick a server, stream the request to it, stream the
// response back, with backpressure both ways (a slow client pauses the upstream
// socket; a slow upstream pauses the client body). Nothing is buffered whole:
// only request body chunks that arrive before the upstream connection is ready
// are held (copied), which is also what makes a connect-failure retry possible.
import type { ErrorCode } from '../../errors.js'
import { now } from '../../clock.js'
import { performance } from 'node:perf_hooks' // the global `performance` is a lazy accessor: a getter call on every use
import { C_RESP_1XX, G_READING, statusClass } from '../../shm/layout.js'
import { recordServerTimes } from '../../shm/request-stats.js'
import type { UpstreamConnection, Exchange } from '../../upstream/connection.js'
import type { ResponseHead } from '../../plugin.js'
import { runResponseHooks } from '../request/chain.js'
import { endOfChunked, httpRequestHead, writeBodyPiece } from './forward-head.js'
import type { ClientResponse } from '../transport/client.js'
import type { Ctx } from '../request/context.js'
import type { ExchangeHost, RouteTarget, ServiceRuntime } from '../runtime.js'
import { ServerTries } from './server-tries.js'
import { logBadResponse } from './bad-response-log.js'
import type { Mirrors } from './mirror.js'
import { TransformedBody, type TransformOwner } from './response-transform.js'
import { type Indexed, IndexedSet } from '../../indexed-set.js'

/**
 * Exchanges in progress in this thread: what the drain deadline has to cut
 * (cutExchanges). Not a Set: one joins and leaves per request (indexed-set.ts says why).
 */
const live = new IndexedSet<ProxyExchange>()

/** Cuts every exchange in progress (the drain deadline passed); returns how many. */
export function cutExchanges (): number {
  const n = live.size
  for (const ex of [...live.items]) ex.cut()
  return n
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE'])

export class ProxyExchange extends ServerTries implements Exchange, Indexed, TransformOwner {
  readonly #dp: ExchangeHost
  readonly #ctx: Ctx
  readonly #client: ClientResponse
  readonly #svc: ServiceRuntime
  readonly #target: RouteTarget
  #conn: UpstreamConnection | null = null
  #head = ''
  /** body chunks (copies) received before the upstream connection was ready */
  #queued: Buffer[] | null = null
  /** the whole body, when it had arrived before the connection was ready: kept to replay it on a retry */
  #replay: Buffer[] | null = null
  #bodyDone: boolean
  #responded = false
  #finished = false
  #reading: boolean
  /** the response body through a transform an onResponse hook set (compress), or null */
  #transform: TransformedBody | null = null
  /** a 'drain' listener on the server's socket is already waiting to resume the client's body: one, however many chunks uWS delivers while paused */
  #bodyWaiting = false
  /** body bytes of a Content-Length response still to come; -1: not known */
  #bodyLeft = -1
  /** performance.now() ms at the pick, the connection ready, the response head (0 = not yet): `show stat` ctime/rtime */
  #pickedAt = 0
  #connectedAt = 0
  #headAt = 0
  requestComplete = false
  /** position in `live` (IndexedSet) */
  setIndex = -1
  /** a mirroring service's copies of this request (mirror.ts); null: none */
  #mirrors: Mirrors | null = null

  constructor (dp: ExchangeHost, ctx: Ctx, client: ClientResponse, target: RouteTarget) {
    super(dp, target.service)
    this.#dp = dp
    this.#ctx = ctx
    this.#client = client
    this.#target = target
    this.#svc = target.service!
    this.#bodyDone = ctx.contentLength === 0
    this.#reading = !this.#bodyDone
  }

  /** Sends copies of this request to `m`'s mirrors (call before start). */
  mirror (m: Mirrors): void {
    this.#mirrors = m
  }

  start (): void {
    live.add(this)
    const client = this.#client
    client.onAbort(() => this.#clientAborted())
    if (this.#reading) {
      this.#dp.stripe.add(G_READING, 1)
      client.onBody((chunk, last) => this.#onClientBody(chunk, last))
    }
    this.#head = httpRequestHead(this.#ctx, this.#svc.hostFallback, this.#svc.conf.kind === 'generate')
    if (this.#mirrors !== null && this.#bodyDone) this.#mirrors.add(null, true, this.#ctx.remoteAddress)
    this.#connect(false)
  }

  /** `failed`: the error of the attempt being retried, reported if no other server is left. */
  #connect (retry: boolean, failed: ErrorCode | null = null, counted = true): void {
    const server = this.claimFor(this.#ctx, retry, counted)
    if (server === null) {
      if (failed !== null) this.#fail(failed, {})
      else this.#fail('LB_ERR_NO_SERVER', this.noServerParams())
      return
    }
    this.#ctx.server = server.conf.name
    this.requestComplete = false
    this.#pickedAt = performance.now()
    this.#connectedAt = 0
    this.#conn = server.pool.acquire(this, this.#ctx.method === 'HEAD')
  }

  onConnected (conn: UpstreamConnection): void {
    this.#connectedAt = performance.now()
    const q = this.#queued
    // the head goes out with this turn's other writes, and with the body pieces written after it in this turn
    conn.writeAtTurnEnd(this.#head)
    this.#queued = null
    // a body held whole before the connection was ready can be sent again on a retry; one streamed from now on cannot
    this.#replay = this.#bodyDone ? q : null
    if (q !== null) for (const chunk of q) writeBodyPiece(conn, chunk, this.#ctx.chunked)
    if (this.#bodyDone) this.#requestSent(conn)
    else conn.deadline = now() + this.#dp.conf.timeouts.clientMs
  }

  #requestSent (conn: UpstreamConnection): void {
    if (this.#ctx.chunked) conn.write(endOfChunked(this.#client.trailers))
    this.requestComplete = true
    conn.deadline = now() + conn.pool.serverTimeoutMs
  }

  #onClientBody (chunk: Buffer, last: boolean): void {
    if (this.#finished) return
    const ctx = this.#ctx
    ctx.bytesIn += chunk.length
    if (ctx.bytesIn > this.#dp.conf.limits.maxBodyBytes) {
      // a chunked body grew past the limit (a declared length was checked before)
      if (this.#conn !== null) this.#conn.destroy()
      this.#fail('LB_ERR_BODY_TOO_LARGE', { limit: this.#dp.conf.limits.maxBodyBytes })
      return
    }
    if (last) {
      this.#bodyDone = true
      this.#endReading()
    }
    const conn = this.#conn
    const copy = Buffer.from(chunk) // the chunk is a view that uWS neuters on return
    if (this.#mirrors !== null) this.#mirrors.add(copy, last, ctx.remoteAddress) // shared: neither side changes it
    if (conn === null || !conn.connected || conn.exchange !== this) {
      (this.#queued ??= []).push(copy)
      return
    }
    const ok = writeBodyPiece(conn, copy, ctx.chunked)
    if (last) this.#requestSent(conn)
    else {
      conn.deadline = now() + this.#dp.conf.timeouts.clientMs
      if (!ok && !this.#bodyWaiting) {
        this.#bodyWaiting = true
        this.#client.pauseBody()
        conn.socket.once('drain', () => { this.#bodyWaiting = false; this.#client.resumeBody() })
      }
    }
  }

  #endReading (): void {
    if (!this.#reading) return
    this.#reading = false
    this.#dp.stripe.add(G_READING, -1)
  }

  onHead (status: number, reason: string, headers: string[], contentLength: number): void {
    const ctx = this.#ctx
    this.#responded = true
    this.#headAt = performance.now()
    ctx.status = status
    const chain = this.#target.chain
    if (chain.onResponse !== null || ctx.responseHeaders !== null) {
      const noBody = ctx.method === 'HEAD' || status === 204 || status === 304
      const head: ResponseHead = { status, headers, transform: null, noBody, contentLength }
      if (ctx.responseHeaders !== null) headers.push(...ctx.responseHeaders)
      if (chain.onResponse !== null) runResponseHooks(chain, ctx, head, this.#dp.log)
      ctx.status = head.status
      if (head.transform !== null) {
        if (noBody) {
          head.transform.destroy()
          // a HEAD answers with the fields a GET would have: that GET's body would be streamed, without Content-Length
          if (ctx.method === 'HEAD') contentLength = -1
        } else {
          // the transformed length is unknown: the client side streams it chunked
          this.#transform = new TransformedBody(head.transform, this.#client, this)
          contentLength = -1
        }
      }
    }
    const slot = this.server!.slot
    this.#dp.stripe.addServer(slot, C_RESP_1XX + statusClass(ctx.status))
    this.#bodyLeft = contentLength
    this.#client.head(ctx.status, ctx.status === status ? reason : '', headers, contentLength)
  }

  transformEnded (): void {
    this.#finish() // counted before the client can see the end (see onEnd)
  }

  transformFailed (err: Error): void {
    if (this.#finished) return
    this.#dp.log.error('response body transform failed', { router: this.#ctx.router, path: this.#ctx.path, error: err.message })
    const conn = this.#conn
    if (conn !== null && conn.exchange === this) conn.destroy()
    this.#client.destroy() // cutting the connection is the only honest signal left
    this.#finish()
  }

  transformDrained (): void {
    const conn = this.#conn
    if (conn !== null && conn.exchange === this) conn.resume()
  }

  onBody (buf: Buffer, start: number, end: number): boolean {
    this.#ctx.bytesOut += end - start
    const tf = this.#transform
    if (tf !== null) return tf.write(buf, start, end)
    // a Content-Length response is complete for the client with its last body byte: count it first (see onEnd)
    const last = this.#bodyLeft > 0 && (this.#bodyLeft -= end - start) === 0
    const conn = this.#conn!
    if (last) this.#finish()
    // on the last piece the client side keeps what it cannot take yet, and ends the response by itself
    if (this.#client.body(buf, start, end) || last) return true
    // client backpressure: the client side kept the bytes; stop reading upstream until it drains.
    // While paused the wait is the client's, so it runs on the client time-out, not the server's.
    conn.deadline = now() + this.#dp.conf.timeouts.clientMs
    this.#client.onDrain(() => {
      if (conn.exchange !== this) return // this response is over; the connection may be serving another one
      conn.deadline = now() + conn.pool.serverTimeoutMs
      conn.resume()
    })
    return false
  }

  onEnd (): void {
    const tf = this.#transform
    if (tf !== null) {
      // the upstream part is over (its connection goes back to the pool); the client's end follows the transform's
      this.#release()
      tf.end()
      return
    }
    // Counted, and the server's slot given back, before the client can see the
    // end: its next request, maybe taken by another worker, must not find this
    // one in flight (leastconn would see a false tie), nor a metric without it.
    this.#finish()
    this.#client.end()
  }

  onUpstreamError (code: ErrorCode, conn: UpstreamConnection): void {
    if (this.#finished) return
    const parser = conn.parser
    if (code === 'LB_ERR_UPSTREAM_PROTOCOL') this.#badResponse(conn.protocolError, parser.detail)
    else if (code === 'LB_ERR_UPSTREAM_RESET' && parser.bytes > 0) this.#badResponse('connection closed before the response was complete', `after ${parser.bytes} bytes`)
    const connectPhase = !conn.connected
    if (code === 'LB_ERR_UPSTREAM_TIMEOUT' && !connectPhase && !this.#bodyDone) {
      // the client stopped sending its body: a client time-out, not the server's fault
      this.#release()
      this.#fail('LB_ERR_CLIENT_TIMEOUT', {}, true)
      return
    }
    const reported: ErrorCode = connectPhase && code === 'LB_ERR_UPSTREAM_RESET' ? 'LB_ERR_UPSTREAM_CONNECT' : code
    const staleKeepAlive = !connectPhase && conn.uses > 1 && conn.parser.bytes === 0 && code === 'LB_ERR_UPSTREAM_RESET'
    this.tryFailed(connectPhase, !staleKeepAlive)
    // what can be sent again: nothing was sent (connect failed: the held body is whole so far and
    // the rest is still to come), or an idempotent request whose body, if any, is held whole
    const replayable = !this.#responded && code !== 'LB_ERR_UPSTREAM_PROTOCOL' && (connectPhase ||
      (conn.parser.bytes === 0 && IDEMPOTENT.has(this.#ctx.method) && (this.#ctx.contentLength === 0 || this.#replay !== null)))
    this.#release()
    if (replayable) {
      if (!connectPhase) this.#queued = this.#replay
      if (staleKeepAlive) {
        // the server closed an idle keep-alive connection as we reused it: nothing was processed, try a
        // fresh connection (uses = 1, so this happens once per try). Not a try of its own: when the server
        // has just died, the fresh connect fails next and must still have its retry on another server.
        this.#connect(false, reported, false)
        return
      }
      if (this.mayRetry(this.#ctx.retryLimit)) {
        this.#ctx.retries++
        const wait = this.retryDelay(this.#ctx)
        if (wait === 0) this.#connect(true, reported)
        else setTimeout(() => { if (!this.#finished) this.#connect(true, reported) }, wait)
        return
      }
    }
    this.#fail(reported, {}) // after the head is out, cuts the connection: the only honest signal left
  }

  /** The server's response was malformed or cut short: logged (rate-limited) with the server and why. */
  #badResponse (reason: string, detail: string): void {
    const server = this.server!.conf
    const ctx = this.#ctx
    logBadResponse(this.#dp.log, { service: this.#svc.conf.name, server: server.name, address: server.address, reason, detail, beforeHead: !this.#responded, method: ctx.method, path: ctx.path })
  }

  /**
   * lb is stopping and the drain deadline passed: the upstream connection is
   * closed, and the client gets a 503 with Connection: close, or, when the
   * response head is already out, its connection closed.
   */
  cut (): void {
    if (this.#finished) return
    const conn = this.#conn
    if (conn !== null && conn.exchange === this) conn.destroy()
    this.#fail('LB_ERR_SHUTDOWN', {}, true)
  }

  /** Gives the server slot back (in-flight count); the connection is gone or reusable. */
  #release (): void {
    const server = this.server
    if (server !== null) {
      if (this.#headAt > 0 && this.#connectedAt > 0) {
        const s = this.#dp.stripe
        recordServerTimes(s.f64, s.base, server.slot, this.#connectedAt - this.#pickedAt, this.#headAt - this.#connectedAt, performance.now() - this.#ctx.t0)
      }
      // what crossed the server's socket, as HAProxy's server bin/bout: the forwarded head (ASCII
      // but for rare non-ASCII values: its length is its size) and body, and the response as read
      const conn = this.#conn
      this.releaseTry(this.#connectedAt > 0 ? this.#head.length + this.#ctx.bytesIn : 0, conn !== null ? conn.parser.bytes : 0)
    }
    this.#conn = null
  }

  #clientAborted (): void {
    if (this.#finished) return
    const conn = this.#conn
    if (conn !== null && conn.exchange === this) conn.destroy() // cancels the upstream request
    if (this.#ctx.status === 0) this.#ctx.status = 499 // nginx's "client closed request"
    this.#finish()
  }

  /** Answers with an error (DataPlane.error: counted first; the connection stays open unless `close`). */
  #fail (code: ErrorCode, params: Record<string, string | number>, close = false): void {
    if (this.#responded) {
      // the server's head is already out (it answered before the body ended): no second head, cut the connection
      this.#client.destroy()
      this.#finish()
      return
    }
    if (this.#end()) this.#dp.error(this.#ctx, this.#client, code, params, close)
  }

  /** Ends the exchange and counts it (DataPlane.finish), once. */
  #finish (): void {
    if (this.#end()) this.#dp.finish(this.#ctx)
  }

  /** Ends the exchange's own part, once (false when it had ended); the caller counts the request. */
  #end (): boolean {
    if (this.#finished) return false
    this.#finished = true
    live.delete(this)
    if (this.#transform !== null) this.#transform.destroy()
    this.#endReading()
    this.#release()
    return true
  }
}
