// The only importer of uWebSockets.js. It copies each request into a Ctx synchronously (uWS request objects live only
// during the callback), attaches onAborted at once, corks every write made outside the request callback, and streams
// bodies with tryEnd/onWritable (known length) or write (chunked) with backpressure reported to the caller. It also
// starts the TLS apps (SSLApp, SNI) and hands WebSocket upgrades and events to the data plane through the interfaces
// of ws-client.ts. What needs no uWS lives beside it (client-state, response-head, body-staging, request-read,
// listen-options, uws-support).
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { constants } from 'node:os'
import { join } from 'node:path'
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_listen_socket, us_socket_context_t } from 'uWebSockets.js'
import { type AtTurnEnd, atTurnEnd } from '../../net/turn.js'
import { ClientState } from './client-state.js'
import { STAGING, stage } from './body-staging.js'
import type { ClientResponse } from './client.js'
import { Ctx } from '../request/context.js'
import { type Listener, type ListenOptions, PLAIN, type RequestHandler, type SentCounter, bindAnyPort, sslOptions } from './listen-options.js'
import { expectsBody, peerText, proxiedText, readHeader } from './request-read.js'
import { UWS_NO_LENGTH, headText, uwsLength } from './response-head.js'
import { nativeBuild, unsupported } from './uws-support.js'
import type { ClientWebSocket, WebSocketUpgrade, WsSession } from '../ws/ws-client.js'
import { dialSelf } from '../ws/ws-handshake.js'

type Uws = typeof import('uWebSockets.js')

/**
 * Loads uWS's native binary: lb's patched copy where its install step made one (uws-support.ts), the shim first,
 * into the global symbol scope, then the copy with RTLD_NOW so that a missing symbol is an error here and never a
 * crash at its first call; elsewhere the package's binary as it is.
 *
 * `maxHeaderBytes` > 0 (limits.max_header_bytes): uWS's limit on a request head becomes twice it, so that a head
 * over the setting reaches lb's check (request-check.ts), whose 431 names it. uWS reads UWS_HTTP_MAX_HEADERS_SIZE
 * once per process, when the binary first loads: the control plane loads it before any worker starts, and a
 * change of the setting needs a restart.
 */
export function loadUws (maxHeaderBytes = 0): Uws {
  if (maxHeaderBytes > 0) process.env.UWS_HTTP_MAX_HEADERS_SIZE = String(2 * maxHeaderBytes)
  const require = createRequire(import.meta.url)
  const { name, version, dir } = nativeBuild()
  try {
    if (!existsSync(join(dir, name))) return require('uWebSockets.js') as Uws
    const { RTLD_NOW, RTLD_GLOBAL } = constants.dlopen as { RTLD_NOW: number, RTLD_GLOBAL: number }
    process.dlopen({ exports: {} }, join(dir, 'libisoc23.so'), RTLD_NOW | RTLD_GLOBAL)
    const m = { exports: {} }
    process.dlopen(m, join(dir, name), RTLD_NOW)
    return m.exports as Uws
  } catch (err) {
    throw unsupported(err, version)
  }
}

class UwsClient extends ClientState implements ClientResponse, WebSocketUpgrade, AtTurnEnd {
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
    // see corkAnchor: with the anchor corked, res.cork runs `upgrade` without corking res
    if (corkAnchor !== null) corkAnchor.cork(() => this.#res.cork(upgrade))
    else this.#res.cork(upgrade)
    return true
  }
}

/**
 * A WebSocket this thread holds open to itself, only ever corked: the way around a bug of this uWS build. A late
 * upgrade (ours wait for the server's 101) must run in res.cork, and HttpResponse::cork, once its callback returns,
 * reads the HTTP state of the socket upgrade() just reallocated as a WebSocket: bytes that happen to say
 * "Connection: close" close it at once (101, then 1006; fixed in uWebSockets PR #1929, not in uWebSockets.js
 * 20.57). While another socket of the loop is corked, res.cork skips that check: so upgrades run inside
 * corkAnchor.cork(), their few writes uncorked. null until started or if it closed: upgrades take the plain path.
 */
let corkAnchor: WebSocket<unknown> | null = null
let anchorStarted: Promise<void> | null = null

/**
 * Connects the cork anchor: an app on an ephemeral loopback port, one node:net handshake to it, then the port
 * closes. Resolves once the anchor is open, or once connecting it failed (upgrades then take the plain path).
 */
function startCorkAnchor (uws: Uws): Promise<void> {
  if (anchorStarted !== null) return anchorStarted
  anchorStarted = new Promise((resolve) => {
    const app = uws.App()
    adopt(app)
    let token: us_listen_socket | false = false
    const done = (): void => { if (token !== false) uws.us_listen_socket_close(token); token = false; resolve() }
    app.ws('/*', {
      compression: uws.DISABLED,
      maxPayloadLength: 16, // it never sends anything; more closes it
      idleTimeout: 0,
      sendPingsAutomatically: false,
      open: (ws: WebSocket<unknown>) => { corkAnchor ??= ws; done() },
      close: (ws: WebSocket<unknown>) => { if (ws === corkAnchor) corkAnchor = null },
    })
    app.listen('127.0.0.1', 0, (t: us_listen_socket | false) => {
      token = t
      if (t === false) resolve()
      else dialSelf(uws.us_socket_local_port(t), done)
    })
  })
  return anchorStarted
}

interface WsUserData { readonly session: WsSession }

/** The fragment sends exist in the binary (uWS WebSocket::sendFirstFragment...) but not in its type definitions. */
type FragmentingWebSocket = WebSocket<WsUserData> & Pick<ClientWebSocket, 'sendFirstFragment' | 'sendFragment' | 'sendLastFragment'>

const apps: TemplatedApp[] = []

/** What this build's apps have beyond its .d.ts: adoptSocket, and the client time-outs in s, checked on a 4-second tick (TimeoutsConf says what each covers). */
type TimedApp = TemplatedApp & { setIdleTimeout (s: number): TimedApp, setResponseTimeout (s: number): TimedApp, adoptSocket (fd: number): void }
let clientTimeouts = [30, 30] // uWS's own until the config's are set: [timeouts.header, timeouts.client_keep_alive]
const applyTimeouts = (app: TemplatedApp): void => { (app as TimedApp).setIdleTimeout(clientTimeouts[0]!).setResponseTimeout(clientTimeouts[1]!) }
const adopt = (app: TemplatedApp): void => { apps.push(app); applyTimeouts(app) } // closed by closeAllApps

/** Sets the client time-outs (s) of every app of this thread and of those it makes later; new timers use them. */
export function setClientTimeouts (headerS: number, keepAliveS: number): void { clientTimeouts = [headerS, keepAliveS]; apps.forEach(applyTimeouts) }

/**
 * Closes every app of this thread with all its connections. A worker thread must call this before it ends (process
 * 'exit'): ending with uWS sockets still registered in the thread's libuv loop trips a libuv assertion that aborts
 * the whole process, not just the thread.
 */
export function closeAllApps (): void { for (const app of apps.splice(0)) app.close() }

/** Copies what the data plane needs of a uWS request (valid only during this callback) into a new Ctx. */
function readRequest (req: HttpRequest, res: HttpResponse, entrypoint: string, proto: 'http' | 'https', proxied: boolean): Ctx {
  const ctx = new Ctx()
  ctx.method = req.getCaseSensitiveMethod() // methods are case-sensitive (RFC 9110 §9.1): "get" is not GET
  ctx.path = req.getUrl()
  ctx.query = req.getQuery() ?? ''
  ctx.entrypoint = entrypoint
  ctx.proto = proto
  const headers = ctx.headers
  req.forEach((k, v) => { headers.push(k, v); readHeader(ctx, k, v) })
  ctx.remoteAddress = proxied ? proxiedText(res.getProxiedRemoteAddressAsText()) : peerText(res.getRemoteAddress())
  return ctx
}

/**
 * Starts a uWS app for one entry point (or one that listens on nothing and serves the connections given to its adopt). Every request is copied into a Ctx and handed to `handler`; so is every
 * WebSocket upgrade request, with a client whose `websocket` is set. Resolves once listening (SO_REUSEPORT: every
 * worker listens on the same address and the kernel spreads connections). An https app whose files cannot be
 * used throws (uWS: "App construction failed"); callers check the files first (core/config/tls.ts).
 */
export async function listenHttp (uws: Uws, host: string, port: number, entrypoint: string, proto: 'http' | 'https',
  handler: RequestHandler, opts: ListenOptions = PLAIN): Promise<Listener | null> {
  const tls = opts.tls
  if (opts.wsMaxMessage > 0) await startCorkAnchor(uws)
  const app = tls === null ? uws.App() : uws.SSLApp(sslOptions(tls.cert, tls.key, tls.ciphers))
  adopt(app)
  const { proxied, conns, sent } = opts
  if (conns !== null) {
    // +1 when a connection opens, -1 when it closes, except after an upgrade: a
    // WebSocket's close comes to the ws close handler below instead
    // eslint-disable-next-line array-callback-return -- uWS's connection filter, not Array.prototype.filter
    app.filter((res: HttpResponse, count) => {
      if ((count as number) < 0) conns.close()
      else if (!conns.open()) res.close() // over global.max_connections; its -1 follows at once
    })
  }
  // the routes of one router: the app's own, or one SNI name's (see below)
  const routes = (): void => {
    app.any('/*', (res: HttpResponse, req: HttpRequest) => {
      const ctx = readRequest(req, res, entrypoint, proto, proxied)
      new UwsClient(res, ctx, sent).serve(handler, ctx)
    })
    if (opts.wsMaxMessage > 0) {
      app.ws<WsUserData>('/*', {
        compression: uws.DISABLED,
        maxPayloadLength: opts.wsMaxMessage, // a bigger client message: uWS closes the connection at once (no close frame)
        maxBackpressure: 0, // 0 = never drop a send: ws-proxy.ts pauses the server's socket instead
        idleTimeout: 0, // ws-proxy.ts runs the idle time-out (any duration, graceful 1001; uWS's: >= 8 s, abrupt)
        sendPingsAutomatically: false, // automatic pings would keep an idle session open for ever
        upgrade: (res: HttpResponse, req: HttpRequest, context: us_socket_context_t) => {
          const ctx = readRequest(req, res, entrypoint, proto, proxied)
          // uWS routes every GET with an Upgrade header here: only "websocket" is tunnelled, the rest is proxied as HTTP
          // (a chunked body too: its connection must close after the answer, see ClientState.chunkedBody)
          const ws = ctx.header('upgrade').toLowerCase() === 'websocket' && !ctx.chunked ? context : null
          new UwsClient(res, ctx, sent, ws).serve(handler, ctx)
        },
        open: (ws: WebSocket<WsUserData>) => ws.getUserData().session.onOpen(ws as FragmentingWebSocket),
        message: (ws: WebSocket<WsUserData>, data: ArrayBuffer, isBinary: boolean) => ws.getUserData().session.onMessage(data, isBinary),
        drain: (ws: WebSocket<WsUserData>) => ws.getUserData().session.onDrain(),
        close: (ws: WebSocket<WsUserData>, code: number, reason: ArrayBuffer) => {
          conns?.close()
          ws.getUserData().session.onClose(code, reason)
        },
        ping: (ws: WebSocket<WsUserData>, data: ArrayBuffer) => ws.getUserData().session.onPing(data),
        pong: (ws: WebSocket<WsUserData>, data: ArrayBuffer) => ws.getUserData().session.onPong(data),
      })
    }
  }
  routes()
  if (tls !== null) {
    // Per-host certificates: uWS picks by SNI, exact names and "*.domain" (one label); others get the default.
    // A connection whose SNI matched a name is routed by that name's own router (uWS's domain()), empty
    // until given the routes: without them uWS closed every request on it unanswered.
    for (const s of tls.sni) {
      for (const h of s.hosts) {
        app.addServerName(h, sslOptions(s.cert, s.key, tls.ciphers))
        app.domain(h)
        routes()
      }
    }
  }
  if (opts.adoptOnly) return { port: 0, close: () => {}, adopt: (fd) => { (app as TimedApp).adoptSocket(fd) } }
  return new Promise((resolve) => {
    const listener = (t: us_listen_socket | false, unix = false): Listener | null => t === false ? null : { port: unix ? 0 : uws.us_socket_local_port(t), close: () => uws.us_listen_socket_close(t) }
    const bind = (p: number, done: (l: Listener | null) => void): void => { app.listen(host, p, (t) => done(listener(t))) }
    if (opts.unixPath !== '') app.listen_unix((t) => resolve(listener(t, true)), opts.unixPath)
    else if (port !== 0) bind(port, resolve)
    else bindAnyPort(bind, resolve) // not a plain bind of port 0: bindAnyPort says why
  })
}
