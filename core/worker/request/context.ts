// Per-request state: one fixed-shape object, every field initialised here, so
// V8 keeps one hidden class. Plugins read the request from it and use the
// pre-declared slots; they never see uWS objects.
import type { ErrorCode } from '../../errors.js'
import type { Logger } from '../../log.js'
import type { ClientResponse } from '../transport/client.js'
import type { PathPolicy } from './path-policy.js'
import type { Span } from '../trace/span.js'

/** An answer produced by a middleware instead of proxying (401, 429, 301, ...). */
export interface Reply {
  status: number
  /** flat [name, value, ...] */
  headers: string[]
  body: string
}

// What response filters (client-filter.ts) are given and made by: declared
// here, next to the Ctx they take, so that neither module imports the other.

/** An error page as the error service answered it (or lb's own answer when it could not). */
export interface Page {
  readonly status: number
  /** flat [name, value, ...], without framing headers (Content-Length, Transfer-Encoding) */
  readonly headers: readonly string[]
  readonly body: Buffer
}

/** What a filter may ask of the data plane. */
export interface FilterHost {
  readonly log: Logger
  /** [limits] max_body (bytes): what a filter that holds a body whole holds at most */
  readonly conf: { readonly limits: { readonly maxBodyBytes: number } }
  /** answers with an lb error (core/errors.ts) on `client`, counted */
  error (ctx: Ctx, client: ClientResponse, code: ErrorCode, params: Record<string, string | number>, close?: boolean): void
  /** counts a request that ends without an answer (the client went away) */
  finish (ctx: Ctx): void
  /**
   * GETs `path` (with `query`, '' for none) from service `service` with `ctx`'s
   * headers (its Host kept), not through any router or middleware, and hands
   * the whole answer to `done`, once; lb's own error answer when no server
   * answers. Returns a function that cancels it (the client went away).
   */
  fetchPage (ctx: Ctx, service: string, path: string, query: string, done: (page: Page) => void): () => void
}

/** Makes a route's filter for one request; one function per middleware instance, shared by its requests. */
export type FilterFactory = (inner: ClientResponse, ctx: Ctx, host: FilterHost) => ClientResponse

export class Ctx {
  /** method as sent (case-sensitive: the standard ones are upper-case) */
  method = ''
  /** path without the query: as received, then its normal form (DataPlane.handle), then as a middleware rewrote it (rewritePath) */
  path = ''
  /** the entry point's path rules (DataPlane.handle): a path a middleware rewrites to is normalised by the same */
  pathPolicy: PathPolicy | null = null
  /** query without '?', '' when none */
  query = ''
  /** lower-case host name without the port ('' when no Host header) */
  host = ''
  /** request headers as flat [name, value, ...], names lower-case */
  headers: string[] = []
  /** client address, canonical text */
  remoteAddress = ''
  proto: 'http' | 'https' = 'http'
  /** the request came over HTTP/2 (core/worker/transport/h2/h2.ts): the access log says so */
  h2 = false
  entrypoint = ''
  /** request body length from Content-Length; -1 when chunked or unknown */
  contentLength = 0
  chunked = false
  /** an HTTP/1.0 request (the node engine; uWS refuses them): it may come without Host */
  http10 = false
  /** the request said Connection: close (core/worker/transport/request-read.ts): the response says so too */
  asksClose = false
  /** performance.now() when the request arrived (ms): times the request for the latency histogram and the access log, where the coarse tick is too coarse */
  t0 = 0
  /** index of the entry point in the config, and the matched router's stats slot (-1 = none): /metrics rows */
  epSlot = -1
  routeSlot = -1
  router = ''
  service = ''
  server = ''
  /** tries on another server after a failure (core/worker/proxy/proxy.ts) */
  retries = 0
  /** the retry middleware's limit of retries for this request (-1: the service's `retries`) and the wait before the first, ms (doubling) */
  retryLimit = -1
  retryIntervalMs = 0
  /** status sent to the client (0 until sent) */
  status = 0
  /** the error code of an answer lb made itself (DataPlane.error), '' otherwise: circuitBreaker tells network errors by it */
  errorCode = ''
  /** set by the grpcWeb middleware: 0 none, 1 binary, 2 base64 text (core/worker/proxy/grpc-web.ts) */
  grpcWeb = 0
  /** the grpc-status a gRPC client got (h2-proxy.ts from the server, or lb's own answer); -1 = none seen: the request counters (/metrics) */
  grpcStatus = -1
  bytesIn = 0
  bytesOut = 0
  /** this request's span when [tracing] is on (core/worker/trace/tracer.ts), null otherwise */
  trace: Span | null = null
  // --- slots for middlewares
  /** authenticated user name (basicAuth, jwt) */
  user = ''
  /** key the rate limiter counted this request under */
  rateKey = ''
  /** two 32-bit hashes of rateKey (core/shm/rate-table.ts KeyHasher), valid when rateKey !== '': hashed once per request */
  rateHashA = 0
  rateHashB = 0
  /** set by a middleware that answers the request itself */
  reply: Reply | null = null
  /** extra headers for the upstream request, flat [name, value, ...] */
  upstreamHeaders: string[] | null = null
  /** lower-case names of request headers not to forward */
  dropHeaders: string[] | null = null
  /** extra headers for the client response, flat [name, value, ...] */
  responseHeaders: string[] | null = null
  /** run once when the request ends, however it ends (atEnd in core/plugin.ts; DataPlane.finish) */
  ends: Array<(ctx: Ctx) => void> | null = null
  /** response filters asked for by middlewares (addClientFilter in core/plugin.ts; client-filter.ts), in chain order; null: none */
  filters: FilterFactory[] | null = null

  header (name: string): string {
    const h = this.headers
    for (let i = 0; i < h.length; i += 2) if (h[i] === name) return h[i + 1]!
    return ''
  }
}
