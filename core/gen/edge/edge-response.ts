// GenResponse (core/gen/http/gen-response.ts) over the data plane's client:
// the reply writers of both APIs write a relayed reply to the worker's client
// as they write to node:http in the service. A head written then a whole body
// (sendJson, sendError) is one complete answer (client.send, with its
// Content-Length); a head followed by writes is a stream (contentLength -1:
// chunked, or until close). A write the client cannot take yet returns false
// and 'drain' follows when it has; the client going away is 'close'.
// The request is counted (EdgeClient's owner: DataPlane.finish) once, before
// the client can see its end, or when the client went away.

import { EventEmitter } from 'node:events'
import type { ApiError } from '../dispatch/request.js'
import type { GenResponse } from '../http/gen-response.js'

/** What the relay uses of the worker's client (core/worker/transport/client.ts ClientResponse has it all). */
export interface EdgeClient {
  readonly aborted: boolean
  onAbort (cb: () => void): void
  onBody (cb: (chunk: Buffer, last: boolean) => void): void
  head (status: number, reason: string, headers: readonly string[], contentLength: number): void
  body (buf: Buffer, start: number, end: number): boolean
  onDrain (cb: () => void): void
  end (): void
  send (status: number, headers: readonly string[], body: string, close?: boolean): void
  bodyBytes (body: string): number
  destroy (): void
}

/** What the relay reads and sets of the request's state (core/worker/request/context.ts Ctx has it all). */
export interface EdgeCtx {
  readonly method: string
  readonly path: string
  readonly user: string
  readonly remoteAddress: string
  readonly contentLength: number
  readonly chunked: boolean
  /** extra headers for the client response from middlewares, flat [name, value, ...] */
  readonly responseHeaders: string[] | null
  /** what middlewares add to (flat) and drop from (lower-case names) the request as forwarded */
  readonly upstreamHeaders: string[] | null
  readonly dropHeaders: string[] | null
  status: number
  /** the model server asked last (the access log's upstream server) */
  server: string
  bytesIn: number
  bytesOut: number
  header (name: string): string
}

export class EdgeResponse extends EventEmitter implements GenResponse {
  readonly #client: EdgeClient
  readonly #ctx: EdgeCtx
  readonly #count: () => void
  #status = 0
  #headers: string[] = []
  #streaming = false
  #counted = false
  headersSent = false
  writableEnded = false
  destroyed = false
  writableNeedDrain = false
  /** How the relay ends this request when lb is stopping (edge.ts cutRelays); null: not relaying yet. */
  onCut: ((e: ApiError) => void) | null = null

  /** `count`: counts the request (DataPlane.finish); called once, here. */
  constructor (client: EdgeClient, ctx: EdgeCtx, count: () => void) {
    super()
    this.#client = client
    this.#ctx = ctx
    this.#count = count
    client.onDrain(() => {
      if (!this.writableNeedDrain) return
      this.writableNeedDrain = false
      this.emit('drain')
    })
  }

  /** The model server `name` is asked (the access log and trace name it as the request's server). */
  serverIs (name: string): void { this.#ctx.server = name }

  /** The client went away (its onAbort): nothing more is written; counted as 499 unless an answer was. */
  gone (): void {
    if (this.destroyed) return
    this.destroyed = true
    if (this.#ctx.status === 0) this.#ctx.status = 499
    this.#counted1()
    this.emit('close')
  }

  writeHead (status: number, headers: Record<string, string | number>): this {
    this.#status = status
    this.#ctx.status = status
    const flat: string[] = []
    // the client side frames the body itself (Content-Length of a whole answer, chunked for a stream)
    for (const k in headers) if (k !== 'content-length') flat.push(k, String(headers[k]))
    const extra = this.#ctx.responseHeaders
    if (extra !== null) flat.push(...extra)
    this.#headers = flat
    this.headersSent = true
    return this
  }

  write (chunk: string): boolean {
    if (this.writableEnded || this.destroyed) return true
    if (!this.#streaming) {
      this.#streaming = true
      this.#client.head(this.#status, '', this.#headers, -1)
    }
    const buf = Buffer.from(chunk)
    this.#ctx.bytesOut += buf.length
    if (this.#client.body(buf, 0, buf.length)) return true
    this.writableNeedDrain = true
    return false
  }

  end (chunk?: string): this {
    if (this.writableEnded || this.destroyed) return this
    if (!this.#streaming) {
      // a whole answer: head and body in one write
      this.writableEnded = true
      const body = chunk ?? ''
      this.#ctx.bytesOut += this.#client.bodyBytes(body)
      this.#counted1()
      this.#client.send(this.#status, this.#headers, body)
      return this
    }
    if (chunk !== undefined && chunk !== '') this.write(chunk)
    this.writableEnded = true
    this.#counted1()
    this.#client.end()
    return this
  }

  destroy (): this {
    if (this.destroyed) return this
    this.#client.destroy()
    this.gone()
    return this
  }

  #counted1 (): void {
    if (this.#counted) return
    this.#counted = true
    this.#count()
  }
}
