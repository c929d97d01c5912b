// The one connect-and-retry policy of the HTTP, WebSocket and TCP proxies,
// as the base class of each exchange (no extra object per request). A try
// claims a server of the service from its balancer (counted in flight and
// selected until released); a failed try counts against the server (passive
// health: max_fails within fail_timeout), and another server, never the one
// that just failed, is tried at most `retries` times and never once
// `retry_timeout` has passed since the first try began. What may be sent again
// after which failure is each proxy's own call; when a retry may start is this.
// The server counters a try moves (in flight, selected, bytes, errors) are
// counted here alone, whichever proxy tries.
import net from 'node:net'
import { now } from '../../clock.js'
import type { ServiceConf } from '../../config/dynamic.js'
import { C_BYTES_IN, C_BYTES_OUT, C_CONN_ERR, C_INFLIGHT, C_RESP_ERR, C_RETRIES, C_SELECTED } from '../../shm/layout.js'
import { isUsable, recordFailure } from '../../shm/server-state.js'
import { noServerReason } from '../../shm/server-why.js'
import { hash32 } from '../../upstream/balancer.js'
import type { ExchangeHost, ServerRuntime, ServiceRuntime } from '../runtime.js'
import type { Ctx } from '../request/context.js'
import type { StickyCookies } from '../../upstream/sticky.js'

export class ServerTries {
  readonly #host: ExchangeHost
  readonly #tried: ServiceRuntime | null
  /** the server of the current try, claimed (in flight) until releaseTry; null between tries */
  protected server: ServerRuntime | null = null
  /** index in the service of the server tried last: the next pick excludes it */
  #idx = -1
  /** stats slot of the server tried last (C_RETRIES is counted on it after its release) */
  #slot = -1
  #attempts = 0
  /** tick when the first try began (retry_timeout): the exchange is created when it starts */
  readonly #firstTry = now()
  /** sticky sessions: the server index the request's cookie names (-2: not read yet, -1: none) */
  #stickyWant = -2
  /** index in ctx.responseHeaders of the Set-Cookie value this exchange added; -1: none */
  #stickyAt = -1

  /** `svc` null: the exchange has no service (it ends without a try). */
  constructor (host: ExchangeHost, svc: ServiceRuntime | null) {
    this.#host = host
    this.#tried = svc
  }

  /**
   * Claims the next server: the balancer's pick, excluding the one tried last
   * when `retry`. `counted` false: a try again that is not a try of its own (a
   * stale keep-alive connection, HTTP). Null when no server is usable.
   */
  protected claimServer (remoteAddress: string, retry: boolean, counted = true, prefer = -1): ServerRuntime | null {
    const svc = this.#tried!
    const host = this.#host
    const exclude = retry ? this.#idx : -1
    const t = now()
    // a sticky client keeps its server while it is usable: up, not drained, not in maintenance, weight > 0
    const idx = prefer >= 0 && prefer !== exclude && isUsable(host.shm.i32, svc.servers[prefer]!.slot, t)
      ? prefer
      : svc.balancer.pick(t, svc.conf.balance === 'source' ? hash32(remoteAddress) : 0, exclude)
    if (idx < 0) return null
    const server = svc.servers[idx]!
    host.stripe.addServer(server.slot, C_INFLIGHT) // until releaseTry
    host.stripe.addServer(server.slot, C_SELECTED)
    this.server = server
    this.#idx = idx
    this.#slot = server.slot
    if (counted) this.#attempts++
    return server
  }

  /**
   * claimServer for an HTTP request (HTTP/1.1, HTTP/2, WebSocket). With sticky sessions it prefers the
   * server the request's cookie names, while usable, and pins the client to the server it got otherwise
   * (a Set-Cookie in the answer; a retry on another server rewrites it).
   */
  protected claimFor (ctx: Ctx, retry: boolean, counted = true): ServerRuntime | null {
    const sticky = this.#tried!.sticky
    if (sticky === null) return this.claimServer(ctx.remoteAddress, retry, counted)
    if (this.#stickyWant === -2) this.#stickyWant = sticky.wanted(ctx.headers)
    const server = this.claimServer(ctx.remoteAddress, retry, counted, this.#stickyWant)
    if (server !== null) this.#pin(ctx, sticky)
    return server
  }

  #pin (ctx: Ctx, sticky: StickyCookies): void {
    const idx = this.#idx
    if (this.#stickyAt >= 0) {
      ctx.responseHeaders![this.#stickyAt] = sticky.setCookie(idx)
      return
    }
    if (idx === this.#stickyWant) return
    // a copy: a middleware may have put its own frozen list there
    const rh = ctx.responseHeaders === null ? [] : ctx.responseHeaders.slice()
    rh.push('set-cookie', sticky.setCookie(idx))
    this.#stickyAt = rh.length - 1
    ctx.responseHeaders = rh
  }

  /** The retry middleware's wait before this retry (ms): its initial interval, doubled after each retry; 0 = at once. */
  protected retryDelay (ctx: Ctx): number {
    return ctx.retryIntervalMs === 0 ? 0 : ctx.retryIntervalMs * 2 ** Math.min(this.#attempts - 1, 16)
  }

  /** LB_ERR_NO_SERVER's parameters: the service and why none of its servers is usable now. */
  protected noServerParams (): Record<string, string> {
    const svc = this.#tried!
    return { service: svc.conf.name, why: noServerReason(this.#host.shm.i32, svc.servers, svc.conf.healthCheck, now()) }
  }

  /**
   * The current try failed (connectPhase: before the connection was up): a connect error, or a reset, time-out or
   * invalid answer after it. `passive`: it also counts towards the server's max_fails within fail_timeout (passive
   * health), as every failure does but a stale keep-alive connection the server had closed.
   */
  protected tryFailed (connectPhase: boolean, passive = true): void {
    const host = this.#host
    const svc = this.#tried!
    const server = this.server!
    host.stripe.addServer(server.slot, connectPhase ? C_CONN_ERR : C_RESP_ERR)
    const c = server.conf
    if (passive && recordFailure(host.shm.i32, server.slot, svc.slot, now(), c.maxFails, c.failTimeoutMs)) {
      host.log.warn('server out of rotation (passive health)', {
        service: svc.conf.name, server: c.name, address: c.address,
        reason: `${c.name} ${c.address}: ${c.maxFails} failed requests within ${c.failTimeoutMs / 1000}s (max_fails); back in ${c.failTimeoutMs / 1000}s`,
      })
    }
  }

  /** Gives the current try's server back (no longer in flight) with the bytes it carried; once per try. */
  protected releaseTry (bytesIn: number, bytesOut: number): void {
    const server = this.server
    if (server === null) return
    this.server = null
    const st = this.#host.stripe
    st.addServer(server.slot, C_INFLIGHT, -1)
    st.addServer(server.slot, C_BYTES_IN, bytesIn)
    st.addServer(server.slot, C_BYTES_OUT, bytesOut)
  }

  /**
   * After a failed try that can be sent again: true (and counted on the failed server) when another may
   * start. `retries`: the retry middleware's limit for this request (-1: the service's).
   */
  protected mayRetry (retries = -1): boolean {
    const conf = this.#tried!.conf
    const limit = conf.retryTimeoutMs
    if (this.#attempts > (retries >= 0 ? retries : conf.retries) || (limit !== 0 && ((now() - this.#firstTry) | 0) >= limit)) return false
    this.#host.stripe.addServer(this.#slot, C_RETRIES)
    return true
  }
}

/**
 * A new connection to a server (WebSocket and TCP; HTTP takes its connections
 * from the server's keep-alive pool): its unix socket, or host and port with
 * Nagle off. The caller bounds the connect by timeouts.connect.
 */
export function connectServer (c: ServiceConf['servers'][number], opts: net.ConnectOpts & net.SocketConstructorOpts): net.Socket {
  return net.connect(c.path !== '' ? { ...opts, path: c.path } : { ...opts, host: c.host, port: c.port, noDelay: true })
}
