// A response filter: a ClientResponse that wraps the client side of one
// request and sees everything written to it (the head before it is sent, the
// body, lb's own answers), as Traefik's middlewares wrap the ResponseWriter.
// The errors, buffering and contentType middlewares are filters. A
// middleware's onRequest asks for one (addClientFilter in core/plugin.ts);
// the data plane wraps the client with the route's filters, in chain order,
// right before the request goes on (DataPlane.#dispatch) or is answered by a
// later middleware or by lb itself (#reply, error). So a filter sees exactly
// what Traefik's wrapper would: the answers of what follows it in the chain.
// Routes without these middlewares pay one null test (Ctx.filters).
//
// The same filter serves every transport (uWS, node:http, HTTP/2) and both
// proxies (proxy.ts, h2-proxy.ts): they all write through ClientResponse. A
// WebSocket upgrade is never wrapped. The request is still counted by what
// answered it (DataPlane.finish, when its answer ends): a filter that changes
// the status the client gets sets ctx.status as soon as it knows (at the head),
// and says what it will make of lb's own answers (statusFor).
import type { ClientResponse } from '../transport/client.js'
import type { WebSocketUpgrade } from '../ws/ws-client.js'
import type { Ctx, FilterHost } from './context.js'

export type { FilterFactory, FilterHost, Page } from './context.js'

/**
 * Passes everything on to `inner`; a filter overrides what it changes. A
 * filter that must hold the request back until it is ready (buffering reads
 * the whole body first) overrides ready().
 */
export class ClientFilter implements ClientResponse {
  protected readonly inner: ClientResponse
  protected readonly ctx: Ctx
  protected readonly host: FilterHost

  constructor (inner: ClientResponse, ctx: Ctx, host: FilterHost) {
    this.inner = inner
    this.ctx = ctx
    this.host = host
  }

  get aborted (): boolean { return this.inner.aborted }
  get started (): boolean { return this.inner.started }
  get websocket (): WebSocketUpgrade | null { return null }
  get trailers (): readonly string[] | null { return this.inner.trailers }
  get sendTrailers (): ((headers: readonly string[]) => void) | undefined {
    const inner = this.inner
    return inner.sendTrailers === undefined ? undefined : (h) => this.trailersOut(h)
  }

  onAbort (cb: () => void): void { this.inner.onAbort(cb) }
  onBody (cb: (chunk: Buffer, last: boolean) => void): void { this.inner.onBody(cb) }
  pauseBody (): void { this.inner.pauseBody() }
  resumeBody (): void { this.inner.resumeBody() }
  head (status: number, reason: string, headers: readonly string[], contentLength: number): void { this.inner.head(status, reason, headers, contentLength) }
  body (buf: Buffer, start: number, end: number): boolean { return this.inner.body(buf, start, end) }
  onDrain (cb: () => void): void { this.inner.onDrain(cb) }
  protected trailersOut (headers: readonly string[]): void { this.inner.sendTrailers?.(headers) }
  end (): void { this.inner.end() }
  send (status: number, headers: readonly string[], body: string, close?: boolean): void { this.inner.send(status, headers, body, close) }
  bodyBytes (body: string): number { return this.inner.bodyBytes(body) }
  destroy (): void { this.inner.destroy() }

  /** The status the client gets for an answer of `status` written here: what lb counts for its own answers before it writes them. */
  statusFor (status: number): number {
    const inner = this.inner
    return inner instanceof ClientFilter ? inner.statusFor(status) : status
  }

  /** Calls `go` when the request may go on; by default when the filters it wraps are ready. */
  ready (go: () => void): void {
    const inner = this.inner
    if (inner instanceof ClientFilter) inner.ready(go)
    else go()
  }
}

/** `client` wrapped by the filters `ctx` asked for (consumed: a second call wraps nothing). */
export function applyFilters (ctx: Ctx, client: ClientResponse, host: FilterHost): ClientResponse {
  const fs = ctx.filters
  if (fs === null || client.websocket !== null) return client
  ctx.filters = null
  let c = client
  for (let i = 0; i < fs.length; i++) c = fs[i]!(c, ctx, host)
  return c
}
