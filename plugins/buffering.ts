// buffering: as Traefik's, the request is read whole before it goes to the
// service, and the response whole before it goes to the client.
// - Request: the body is held until its end, then forwarded with a
//   Content-Length (never chunked: the service sees the length up front).
//   Longer than max_request_body_bytes: 413 (LB_ERR_BODY_TOO_LARGE), nothing forwarded.
// - Response: held whole, then sent with its Content-Length (and its trailers,
//   from an HTTP/2 service). Longer than max_response_body_bytes: 500
//   (LB_ERR_RESPONSE_TOO_LARGE), as Traefik; a response the server cut midway
//   gets lb's 502 instead of a truncated one (nothing of it was sent yet).
// - disable_request_buffer / disable_response_buffer (Traefik's) stream that
//   side; a request's declared Content-Length is still held to the bound.
// Bodies are held in memory, never spilled to disk as Traefik does above
// mem_*_body_bytes (accepted and shown, for Traefik's configs): a bound always
// applies (max_*_body_bytes, or [limits] max_body when that is 0), the chunks
// are kept as they came until the end, and a temp file would put disk writes
// on the worker thread every other request of that worker waits on.
// retry_expression is refused: lb's retry policy is the retry middleware and
// the service's `retries` (README), which never replay after the answer began.
import {
  type Checker, type ClientResponse, type Ctx, type FilterHost, type Table, ClientFilter, NEXT, addClientFilter, definePlugin, formatError, join, setHeader,
} from 'lb/plugin'

export interface BufferingConf {
  /** bytes; 0 = no bound of its own ([limits] max_body applies) */
  readonly maxRequestBodyBytes: number
  /** Traefik's spill-to-disk threshold (its default, 1048576, when 0); lb holds bodies in memory (see above) */
  readonly memRequestBodyBytes: number
  readonly maxResponseBodyBytes: number
  readonly memResponseBodyBytes: number
  readonly disableRequestBuffer: boolean
  readonly disableResponseBuffer: boolean
}

const MAX = Number.MAX_SAFE_INTEGER

function validate (c: Checker, t: Table, path: string): BufferingConf {
  c.table(t, path, ['max_request_body_bytes', 'mem_request_body_bytes', 'max_response_body_bytes', 'mem_response_body_bytes', 'retry_expression',
    'disable_request_buffer', 'disable_response_buffer'])
  if (t.retry_expression !== undefined && t.retry_expression !== '') {
    c.problems.push(`${join(path, 'retry_expression')}: not supported by lb (it never replays a request after the service answered); ` +
      'retry on another server with the retry middleware or the service\'s `retries`, and remove retry_expression')
  }
  return {
    maxRequestBodyBytes: c.int(t, 'max_request_body_bytes', path, 0, 0, MAX),
    memRequestBodyBytes: c.int(t, 'mem_request_body_bytes', path, 0, 0, MAX),
    maxResponseBodyBytes: c.int(t, 'max_response_body_bytes', path, 0, 0, MAX),
    memResponseBodyBytes: c.int(t, 'mem_response_body_bytes', path, 0, 0, MAX),
    disableRequestBuffer: c.bool(t, 'disable_request_buffer', path, false),
    disableResponseBuffer: c.bool(t, 'disable_response_buffer', path, false),
  }
}

const TEXT = ['content-type', 'text/plain'] as const

interface Held { status: number, reason: string, headers: readonly string[] }

class Buffered extends ClientFilter {
  readonly #conf: BufferingConf
  readonly #name: string
  /** the request body, once read whole (null: not read by this filter) */
  #request: Buffer | null = null
  #held: Held | null = null
  #chunks: Buffer[] = []
  #size = 0
  /** the response went over its bound: it is dropped, the client gets the 500 */
  #over = false
  #trailers: readonly string[] | null = null

  constructor (inner: ClientResponse, ctx: Ctx, host: FilterHost, conf: BufferingConf, name: string) {
    super(inner, ctx, host)
    this.#conf = conf
    this.#name = name
  }

  #bound (own: number): number {
    const limit = this.host.conf.limits.maxBodyBytes
    return own === 0 ? limit : Math.min(own, limit)
  }

  /** The request goes on once its body is read whole (see the file comment). */
  override ready (go: () => void): void {
    const ctx = this.ctx
    const max = this.#bound(this.#conf.maxRequestBodyBytes)
    if (ctx.contentLength > max) {
      this.host.error(ctx, this.inner, 'LB_ERR_BODY_TOO_LARGE', { limit: max })
      return
    }
    if (this.#conf.disableRequestBuffer || (ctx.contentLength === 0 && !ctx.chunked)) {
      super.ready(go)
      return
    }
    const chunks: Buffer[] = []
    let size = 0
    let done = false
    this.inner.onAbort(() => {
      if (done) return
      done = true
      if (ctx.status === 0) ctx.status = 499
      this.host.finish(ctx)
    })
    this.inner.onBody((chunk, last) => {
      if (done) return
      size += chunk.length
      if (size > max) {
        done = true
        ctx.bytesIn = size
        this.host.error(ctx, this.inner, 'LB_ERR_BODY_TOO_LARGE', { limit: max })
        return
      }
      chunks.push(Buffer.from(chunk)) // the chunk is a view the transport reuses
      if (!last) return
      done = true
      this.#request = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      ctx.chunked = false
      ctx.contentLength = size
      setHeader(ctx.headers, 'content-length', String(size))
      super.ready(go)
    })
  }

  override onBody (cb: (chunk: Buffer, last: boolean) => void): void {
    const body = this.#request
    if (body === null) this.inner.onBody(cb)
    else if (body.length > 0) cb(body, true)
  }

  override head (status: number, reason: string, headers: readonly string[], contentLength: number): void {
    if (this.#conf.disableResponseBuffer || this.ctx.method === 'HEAD') {
      this.inner.head(status, reason, headers, contentLength)
      return
    }
    this.#held = { status, reason, headers }
    if (contentLength > this.#bound(this.#conf.maxResponseBodyBytes)) this.#overflow()
  }

  /** Counted as the client gets it (the exchange counts the request once its body has ended). */
  #overflow (): void {
    this.#over = true
    this.#chunks = []
    this.ctx.status = 500
    this.ctx.errorCode = 'LB_ERR_RESPONSE_TOO_LARGE'
  }

  override body (buf: Buffer, start: number, end: number): boolean {
    if (this.#held === null) return this.inner.body(buf, start, end)
    if (this.#over) return true
    this.#size += end - start
    if (this.#size > this.#bound(this.#conf.maxResponseBodyBytes)) this.#overflow()
    else this.#chunks.push(Buffer.from(buf.subarray(start, end))) // a view of a reused read buffer
    return true
  }

  protected override trailersOut (headers: readonly string[]): void {
    if (this.#held === null) this.inner.sendTrailers?.(headers)
    else this.#trailers = headers
  }

  override end (): void {
    const h = this.#held
    if (h === null) {
      this.inner.end()
      return
    }
    this.#held = null
    const inner = this.inner
    if (this.#over) {
      const limit = this.#bound(this.#conf.maxResponseBodyBytes)
      inner.send(500, TEXT, formatError('LB_ERR_RESPONSE_TOO_LARGE', { limit, middleware: this.#name }) + '\n')
      return
    }
    const body = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks)
    this.#chunks = []
    inner.head(h.status, h.reason, h.headers, this.#trailers === null ? body.length : -1)
    if (body.length > 0) inner.body(body, 0, body.length)
    if (this.#trailers !== null) inner.sendTrailers?.(this.#trailers)
    inner.end()
  }

  /** The server cut its answer midway: nothing of it was sent, so the client gets lb's 502 rather than a cut one. */
  override destroy (): void {
    if (this.#held === null) {
      this.inner.destroy()
      return
    }
    this.#held = null
    this.#chunks = []
    this.ctx.status = 502
    this.ctx.errorCode = 'LB_ERR_UPSTREAM_RESET'
    this.inner.send(502, TEXT, formatError('LB_ERR_UPSTREAM_RESET', {}) + '\n')
  }
}

export default definePlugin<BufferingConf>({
  name: 'buffering',
  api: 1,
  validate,
  create (conf, env) {
    const name = env.name
    const filter = (inner: ClientResponse, ctx: Ctx, host: FilterHost): ClientResponse => new Buffered(inner, ctx, host, conf, name)
    return {
      onRequest (ctx) {
        addClientFilter(ctx, filter)
        return NEXT
      },
    }
  },
})
