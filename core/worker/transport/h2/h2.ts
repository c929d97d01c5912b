// The only importer of node:http2 in the data plane: HTTP/2 to clients. Each
// stream is copied into the same Ctx the uWS adapter builds (method, path,
// query, lower-case headers with :authority as Host, client address, entry
// point, proto) and handed to the same handler (DataPlane.handle), through a
// ClientResponse over the stream: routing, middlewares, balancing, retries,
// the access log and the counters do not know the transport.
//
// A session comes from the TLS terminator (ALPN chose h2, tls-terminator.ts) or
// from an h2c listener (h2c.ts), both in worker 0, which hand its socket to
// the one http2 server made here per entry point ('connection').
//
// Request bodies: flow control is the backpressure: pauseBody stops reading
// the stream, so node:http2 sends no WINDOW_UPDATE and the client stops at
// the stream's window (http2.initial_window_size). Response bodies: a write
// that node:http2 cannot take at once returns false and onDrain follows.
import http2 from 'node:http2'
import { now } from '../../../clock.js'
import type { Http2Conf } from '../../../config/http2.js'
import type { Logger } from '../../../log.js'
import { canonicalIp } from '../../../net/ip.js'
import type { ClientResponse } from '../client.js'
import { ClientState } from '../client-state.js'
import { Ctx } from '../../request/context.js'
import type { RequestHandler } from '../listen-options.js'
import { readHeader } from '../request-read.js'
import { type Answered, LINGER_MS, dropAnswered, holdAnswered } from './answered.js'
import { RESET_BURST, RESET_RATE, clientReset, watchResets } from './rapid-reset.js'

const { NGHTTP2_NO_ERROR, NGHTTP2_CANCEL, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants
const END_STREAM = 0x1
const NO_BODY = new ArrayBuffer(0)
const ignore = (): void => {}

/** Connection-specific fields an HTTP/1.1 server may send that HTTP/2 forbids (RFC 9113 §8.2.2; node:http2 throws on them). */
function connectionField (k: string): boolean {
  return k === 'connection' || k === 'keep-alive' || k === 'proxy-connection' || k === 'transfer-encoding' || k === 'upgrade' || k === 'content-length'
}

/** lb's flat [name, value, ...] response headers as node:http2 wants them; repeated names (set-cookie) become arrays. */
function responseHeaders (status: number, headers: readonly string[], contentLength: number): http2.OutgoingHttpHeaders {
  const out: http2.OutgoingHttpHeaders = { ':status': status }
  for (let i = 0; i < headers.length; i += 2) {
    const k = headers[i]!.toLowerCase()
    if (connectionField(k)) continue
    const v = headers[i + 1]!
    const prev = out[k]
    if (prev === undefined) out[k] = v
    else if (Array.isArray(prev)) prev.push(v)
    else out[k] = [String(prev), v]
  }
  if (contentLength >= 0) out['content-length'] = contentLength
  return out
}

/**
 * One request's stream. ClientState gives what is common with the uWS
 * adapter (abort, early body chunks); the rest is node:http2's own.
 */
class H2Client extends ClientState implements ClientResponse, Answered {
  readonly websocket = null
  readonly #stream: http2.ServerHttp2Stream
  /** trailer fields for the end of a gRPC response (sent on 'wantTrailers') */
  #trailers: http2.OutgoingHttpHeaders = {}
  /** the client has sent all of its request (END_STREAM) */
  #requestDone: boolean
  /** timeouts.client (ms), for #watch */
  readonly #timeoutMs: number
  #watched = false
  /** tick (clock.ts now) of the whole answer handed to node:http2; 0: not yet */
  #answeredAt = 0
  /** position in answered.ts's set */
  setIndex = -1

  /** `ended`: the request's head came with END_STREAM. `timeoutMs`: timeouts.client now. */
  constructor (stream: http2.ServerHttp2Stream, ctx: Ctx, ended: boolean, timeoutMs: number) {
    super(ctx.method === 'HEAD', false, false, null)
    this.#stream = stream
    this.#timeoutMs = timeoutMs
    const session = stream.session // by 'close', node:http2 has taken it off the stream
    stream.on('close', () => {
      // reset by the client before it had its answer: counted against rapid reset (rapid-reset.ts)
      if (!this.ended && stream.rstCode !== NGHTTP2_NO_ERROR) clientReset(session)
      dropAnswered(this)
      this.gone()
    })
    stream.on('error', ignore) // a reset or a session error: 'close' follows
    this.#requestDone = ended
    // a body is to come: the client may never send it
    if (!ended) this.#watch()
    // A request without a body is left unread. Read to its end, node:http2 destroys the stream the moment its
    // END_STREAM goes out, before that write's callback, and every such callback then builds an
    // ERR_STREAM_DESTROYED (Writable's errorBuffer, Node 20 and 22): a stack trace per response, an eighth of
    // the thread's time. Unread, it waits for the writes to finish (its kMaybeDestroy), then reads and ends it.
    if (ctx.contentLength !== 0) {
      stream.on('data', (chunk: Buffer) => {
        // once answered the rest of an upload is dropped (send closes the stream after the answer)
        if (!this.ended) this.received((chunk.buffer as ArrayBuffer).slice(chunk.byteOffset, chunk.byteOffset + chunk.length), false)
      })
      stream.on('end', () => {
        this.#requestDone = true
        if (!this.ended) this.received(NO_BODY, true)
      })
    }
  }

  pauseBody (): void { if (!this.aborted && !this.ended) this.#stream.pause() }
  resumeBody (): void { if (!this.aborted) this.#stream.resume() }

  head (status: number, _reason: string, headers: readonly string[], contentLength: number): void {
    if (this.aborted || this.ended) return
    this.started = true
    // HTTP/2 has no reason phrase; node:http2 itself ends 204, 205 and 304 at once
    const out = responseHeaders(status, headers, contentLength)
    const s = this.#stream
    // a gRPC response ends with trailers; one whose status is in its head (Trailers-Only) ends with the head
    const grpc = String(out['content-type'] ?? '').startsWith('application/grpc') && !this.headRequest
    const only = grpc && out['grpc-status'] !== undefined
    s.respond(out, { endStream: this.headRequest || only, waitForTrailers: grpc && !only })
    if (grpc && !only) {
      s.once('wantTrailers', () => {
        const t = this.#trailers
        s.sendTrailers(Object.keys(t).length > 0 ? t : { 'grpc-status': '13', 'grpc-message': 'the server sent no grpc-status' })
      })
    }
  }

  sendTrailers (headers: readonly string[]): void {
    const t: http2.OutgoingHttpHeaders = {}
    for (let i = 0; i < headers.length; i += 2) t[headers[i]!] = headers[i + 1]!
    this.#trailers = t
  }

  body (buf: Buffer, start: number, end: number): boolean {
    const s = this.#stream
    if (this.aborted || this.ended || s.writableEnded) return true
    // a copy: `buf` is the upstream client's shared read buffer
    if (s.write(Buffer.from(buf.subarray(start, end)))) return true
    this.#watch() // the client's window is shut: it may never open it
    s.once('drain', () => { const cb = this.drainCb; if (cb !== null && !this.aborted) cb() })
    return false
  }

  end (): void {
    if (this.aborted || this.ended) return
    this.ended = true
    if (!this.#stream.writableEnded) this.#stream.end()
    this.#answered()
  }

  /** `close` is for HTTP/1.1 framing: a stream never carries another request, so only this stream ends. */
  send (status: number, headers: readonly string[], body: string, _close = false): void {
    if (this.aborted || this.ended) return
    this.started = true
    this.ended = true
    const s = this.#stream
    const n = Buffer.byteLength(body)
    // no body: one HEADERS frame with END_STREAM (a gRPC error is such a Trailers-Only response)
    s.respond(responseHeaders(status, headers, n), { endStream: this.headRequest || n === 0 })
    if (this.headRequest || n === 0) {
      if (!this.#requestDone) setImmediate(() => { if (!s.closed) s.close(NGHTTP2_NO_ERROR) })
      return
    }
    // an answer before the request body ended (401, 413...): RST_STREAM NO_ERROR once it is out tells the client
    // to stop sending (RFC 9113 §8.1) instead of uploading into a stream nobody reads
    if (this.#requestDone) s.end(body)
    else s.end(body, () => { if (!s.closed) s.close(NGHTTP2_NO_ERROR) })
    this.#answered()
  }

  lingering (t: number): void {
    if (t - this.#answeredAt < LINGER_MS) return
    dropAnswered(this)
    this.#watch()
  }

  /** The whole answer is with node:http2: watched from now if it is still there in a second (answered.ts). */
  #answered (): void {
    if (this.#watched || this.#stream.closed) return
    this.#answeredAt = now()
    holdAnswered(this)
  }

  /**
   * Resets the stream (RST_STREAM CANCEL) once no frame went either way on it for timeouts.client (a body that
   * never comes, a window never opened). Armed once, only for a stream the client holds up (answered.ts says why).
   */
  #watch (): void {
    if (this.#watched) return
    this.#watched = true
    const s = this.#stream
    s.setTimeout(this.#timeoutMs, () => { if (!s.closed) s.close(NGHTTP2_CANCEL) })
  }

  /**
   * RST_STREAM INTERNAL_ERROR, and no END_STREAM before it: a response cut short must not read as complete.
   * close(code) would end the writable side first, and nghttp2 would send the END_STREAM (an empty DATA frame)
   * before the reset; destroy(err) resets the stream without ending it (Writable skips _final once destroyed).
   */
  destroy (): void {
    if (this.aborted || this.ended) return
    this.ended = true
    this.#stream.destroy(new Error('response cut short'))
  }
}

/** A stream's request as a Ctx: pseudo-headers to method, path, query and Host; cookies joined into one field (RFC 9113 §8.2.3). */
function readStream (raw: readonly string[], ended: boolean, remote: string, entrypoint: string, proto: 'http' | 'https'): Ctx {
  const ctx = new Ctx()
  ctx.entrypoint = entrypoint
  ctx.proto = proto
  ctx.h2 = true
  ctx.remoteAddress = remote
  const headers = ctx.headers
  let authority = ''
  let cookie = ''
  let hasHost = false
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i]!
    const v = raw[i + 1]!
    if (k.charCodeAt(0) === 58) { // ':' pseudo-header; node:http2 refuses unknown ones and duplicates
      if (k === ':method') ctx.method = v
      else if (k === ':path') {
        const q = v.indexOf('?')
        ctx.path = q < 0 ? v : v.slice(0, q)
        ctx.query = q < 0 ? '' : v.slice(q + 1)
      } else if (k === ':authority') authority = v
      continue
    }
    if (k === 'cookie') {
      cookie = cookie === '' ? v : cookie + '; ' + v
      continue
    }
    if (k === 'host') hasHost = true
    headers.push(k, v)
    readHeader(ctx, k, v)
  }
  if (cookie !== '') headers.push('cookie', cookie)
  if (!hasHost && authority !== '') {
    headers.push('host', authority)
    readHeader(ctx, 'host', authority)
  }
  // a body without Content-Length (no END_STREAM on the head): relayed upstream chunked, as HTTP/1.1's would be
  if (!ended && ctx.contentLength === 0 && !headers.includes('content-length')) {
    ctx.contentLength = -1
    ctx.chunked = true
  }
  return ctx
}

export interface H2Options {
  readonly conf: Http2Conf
  readonly entrypoint: string
  readonly proto: 'http' | 'https'
  readonly handler: RequestHandler
  /** timeouts.client now (ms): a stream with no frame either way for this long is reset (a body that never comes) */
  readonly streamTimeoutMs: () => number
  readonly log: Logger
}

/**
 * The HTTP/2 server of one entry point. It listens on nothing: the caller emits
 * 'connection' with each socket (TLS with ALPN h2, or plain h2c).
 */
export function h2Server (o: H2Options): http2.Http2Server {
  const c = o.conf
  const server = http2.createServer({
    settings: {
      enablePush: false, // a proxy has nothing to push
      maxConcurrentStreams: c.maxConcurrentStreams,
      maxHeaderListSize: c.maxHeaderListSize,
      initialWindowSize: c.initialWindowSize,
    },
    maxHeaderListPairs: c.maxHeaderPairs, // more fields than this in one head: the stream is refused
    // memory nghttp2 may hold for one session (MB; node's default): a client that piles up unread or unacknowledged
    // frames is refused new streams, then closed, instead of growing the worker's heap
    maxSessionMemory: 10,
    // malformed frames a session may send before it is closed; node's default 1000 lets an attacker make
    // nghttp2 do a thousand rounds of error handling per connection: a correct client sends none
    maxSessionInvalidFrames: 100,
    // streams refused (over max_concurrent_streams, a bad head) before the session is closed: a client that
    // keeps opening past the limit is abusing it (node's default 100)
    maxSessionRejectedStreams: 100,
    // rapid reset (CVE-2023-44487): nghttp2 refills 33 RST_STREAM tokens a second up to a burst of 1000 and
    // ends the session (GOAWAY) past them. A browser cancelling navigations or a gRPC client cancelling calls
    // stays far below; opening and resetting streams in a loop does not. (nghttp2's own values, set on purpose.)
    streamResetBurst: RESET_BURST,
    streamResetRate: RESET_RATE,
    // PINGs and SETTINGS lb itself has outstanding (it sends none but the first SETTINGS); flood ACKs a client
    // makes lb queue are bounded by nghttp2's max outbound ACK (1000), past which the session ends
    maxOutstandingPings: 10,
    maxOutstandingSettings: 10,
  } as http2.ServerOptions)
  server.on('session', (session: http2.ServerHttp2Session) => {
    // node:http2 ends a session with an error when its client broke a bound (too many invalid frames or refused
    // streams, nghttp2's memory or flood limits): the session closes, its streams get 'close', and the operator
    // reads who and why, once per connection (at info, as nginx logs a client's protocol errors)
    // (the address is read now: by the error, the socket is gone)
    const client = session.socket?.remoteAddress ?? ''
    const closed = (code: string, reason: string): void => {
      o.log.info('HTTP/2 session closed: the client broke a protocol bound', { entrypoint: o.entrypoint, client: canonicalIp(client), code, reason })
    }
    let rapid = false
    session.on('error', (e: Error & { code?: string }) => { if (!rapid) closed(e.code ?? '', e.message) })
    watchResets(session, () => {
      rapid = true
      closed('RAPID_RESET', `${RESET_BURST} streams reset by the client at once (rapid reset, CVE-2023-44487)`)
      // GOAWAY ENHANCE_YOUR_CALM, then the close (without an error, destroy's code falls back to NO_ERROR); not
      // from inside the stream's 'close', which node:http2 may emit within nghttp2's callback (an abort there)
      setImmediate(() => { if (!session.destroyed) session.destroy(new Error('rapid reset'), NGHTTP2_ENHANCE_YOUR_CALM) })
    })
    // idle: no frame either way (node:http2 resets the timer on every read and write)
    session.setTimeout(c.idleTimeoutMs, () => { session.close(); session.destroy() })
  })
  server.on('stream', (stream: http2.ServerHttp2Stream, _h: http2.IncomingHttpHeaders, flags: number, raw: string[]) => {
    const sock = stream.session?.socket
    const ended = (flags & END_STREAM) !== 0
    const ctx = readStream(raw, ended, canonicalIp(sock?.remoteAddress ?? ''), o.entrypoint, o.proto)
    o.handler(ctx, new H2Client(stream, ctx, ended, o.streamTimeoutMs()))
  })
  return server
}
