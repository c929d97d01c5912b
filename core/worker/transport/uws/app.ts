// The uWS engine's listeners (`engine = "uws"`, the default): an App or SSLApp (SNI names) per entry point, every
// request copied into a Ctx synchronously (uWS request objects live only during the callback) and handed to the data
// plane with a UwsClient (client.ts), WebSocket upgrades and events handed on through the interfaces of ws-client.ts.
// This folder holds every module that touches uWebSockets.js; what needs no uWS lives beside it (client-state,
// response-head, body-staging, request-read, listen-options).
import type { HttpRequest, HttpResponse, WebSocket, us_listen_socket, us_socket_context_t } from 'uWebSockets.js'
import { Ctx } from '../../request/context.js'
import { type Listener, type ListenOptions, PLAIN, type RequestHandler, bindAnyPort, sslOptions } from '../listen-options.js'
import { peerText, proxiedText, readHeader } from '../request-read.js'
import type { ClientWebSocket } from '../../ws/ws-client.js'
import { type TimedApp, adopt } from './apps.js'
import { UwsClient, type WsUserData } from './client.js'
import { startCorkAnchor } from './cork-anchor.js'
import type { Uws } from './native.js'

/** The fragment sends exist in the binary (uWS WebSocket::sendFirstFragment...) but not in its type definitions. */
type FragmentingWebSocket = WebSocket<WsUserData> & Pick<ClientWebSocket, 'sendFirstFragment' | 'sendFragment' | 'sendLastFragment'>

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
