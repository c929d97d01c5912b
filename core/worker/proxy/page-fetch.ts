// The errors middleware's page request (plugins/errors.ts): a GET to the error
// service, made as Traefik makes it (customerrors: the client's headers, its
// Host, method GET, no body), straight to the service's balancer, not through
// any router or middleware. It runs as an ordinary exchange (proxy.ts, or
// h2-proxy.ts for an h2c/h2 service: one code path) on a request context of
// its own, and answers into a Capture instead of a client. It is not a request
// of its own in the counters or the access log: the client's request is,
// with the status the client got. The page is held whole (pages are small; a
// bound, PAGE_MAX, keeps a runaway one from filling memory).
import { now } from '../../clock.js'
import { type ErrorCode, ERRORS, formatError } from '../../errors.js'
import { EMPTY_CHAIN } from '../request/chain.js'
import type { Page } from '../request/client-filter.js'
import { Ctx } from '../request/context.js'
import type { ClientResponse } from '../transport/client.js'
import type { ExchangeHost, ServiceRuntime } from '../runtime.js'
import { H2Exchange } from './h2-proxy.js'
import { ProxyExchange } from './proxy.js'

/** An error page longer than this (bytes) counts as the error service failing: the client gets lb's error text. */
export const PAGE_MAX = 1024 * 1024

const TEXT = ['content-type', 'text/plain'] as const
/** request fields that describe the client's body: the page request has none */
const BODY_FIELDS = new Set(['content-length', 'transfer-encoding', 'expect', 'content-type', 'content-encoding'])
const NOTHING = Buffer.alloc(0)

/** Takes an exchange's answer whole, as a client would get it, and hands it on once. */
class Capture implements ClientResponse {
  aborted = false
  started = false
  readonly websocket = null
  readonly trailers = null
  #status = 0
  #headers: readonly string[] = []
  #chunks: Buffer[] = []
  #size = 0
  #abort: (() => void) | null = null
  readonly #done: (page: Page) => void

  constructor (done: (page: Page) => void) {
    this.#done = done
  }

  onAbort (cb: () => void): void { this.#abort = cb }
  onBody (): void {}
  pauseBody (): void {}
  resumeBody (): void {}
  onDrain (): void {}
  bodyBytes (body: string): number { return Buffer.byteLength(body) }

  head (status: number, _reason: string, headers: readonly string[]): void {
    this.started = true
    this.#status = status
    this.#headers = headers
  }

  body (buf: Buffer, start: number, end: number): boolean {
    if (this.aborted) return true
    this.#size += end - start
    if (this.#size > PAGE_MAX) {
      // the error service failed, as far as the client is concerned; the exchange cuts its request once this call returns
      const cb = this.#abort
      this.#abort = null
      this.#answer('LB_ERR_UPSTREAM_PROTOCOL')
      if (cb !== null) queueMicrotask(cb)
      return true
    }
    this.#chunks.push(Buffer.from(buf.subarray(start, end))) // a view of a reused buffer
    return true
  }

  end (): void {
    if (this.aborted) return
    this.aborted = true
    this.#done({ status: this.#status, headers: this.#headers, body: this.#chunks.length === 0 ? NOTHING : Buffer.concat(this.#chunks) })
  }

  send (status: number, headers: readonly string[], body: string): void {
    if (this.aborted) return
    this.aborted = true
    this.#done({ status, headers, body: Buffer.from(body) })
  }

  /** the exchange cut the answer (the server reset it midway): what came is not the page */
  destroy (): void { this.#answer('LB_ERR_UPSTREAM_RESET') }

  /** lb's own answer, as the service's error (DataPlane.error's text shape) */
  #answer (code: ErrorCode): void {
    this.send(ERRORS[code].status, TEXT, formatError(code, {}) + '\n')
  }

  /** The client went away: the exchange cancels its upstream request; nothing is handed on. */
  cancel (): void {
    if (this.aborted) return
    const cb = this.#abort
    this.#abort = null
    if (cb !== null) cb()
    this.aborted = true
  }
}

/** See the file comment; `svc` undefined when the generation has no such service (a reload dropped it). */
export function fetchPage (host: ExchangeHost, svc: ServiceRuntime | undefined, ctx: Ctx, path: string, query: string,
  done: (page: Page) => void): () => void {
  const cap = new Capture(done)
  if (svc === undefined) {
    cap.send(ERRORS.LB_ERR_NO_SERVER.status, TEXT, formatError('LB_ERR_NO_SERVER', { service: '(none)', why: 'the error service is not in this generation' }) + '\n')
    return () => {}
  }
  // a weighted or failover service: the service it picks serves the page (groups nest, never in a cycle)
  while (svc.group !== null) svc = svc.group.pick(host.shm.i32, now())
  const sub = new Ctx()
  sub.method = 'GET'
  sub.path = path
  sub.query = query
  sub.host = ctx.host
  sub.pathPolicy = ctx.pathPolicy
  const h = ctx.headers
  for (let i = 0; i < h.length; i += 2) if (!BODY_FIELDS.has(h[i]!)) sub.headers.push(h[i]!, h[i + 1]!)
  sub.remoteAddress = ctx.remoteAddress
  sub.proto = ctx.proto
  sub.h2 = ctx.h2
  sub.entrypoint = ctx.entrypoint
  sub.epSlot = ctx.epSlot
  sub.router = ctx.router
  sub.service = svc.conf.name
  sub.t0 = ctx.t0
  // the page's exchange uses the data plane's servers and counters, but is neither answered nor counted as a request
  const sub2: ExchangeHost = {
    conf: host.conf,
    shm: host.shm,
    stripe: host.stripe,
    log: host.log,
    error: (_c, client, code, params) => client.send(ERRORS[code].status, TEXT, formatError(code, params) + '\n'),
    finish: () => {},
  }
  const target = { service: svc, chain: EMPTY_CHAIN, routerSlot: -1, leaves: null }
  if (svc.conf.protocol === 'http') new ProxyExchange(sub2, sub, cap, target).start()
  else new H2Exchange(sub2, sub, cap, target).start()
  return () => cap.cancel()
}
