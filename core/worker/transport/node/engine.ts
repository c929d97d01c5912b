// The node engine (`engine = "node"` on an http or https entry point): the
// same request path as uWS entry points (every request becomes a Ctx and a
// ClientResponse handed to the data plane's RequestHandler) on Node's own
// HTTP/1.1 parser, llhttp (node:http, node:https). With this file,
// client.ts and ws.ts, the only data-plane users of node:http's
// server side. It serves what uWS refuses (README "HTTP engines"): HTTP/1.0
// with and without keep-alive, pipelining in order behind proxied answers,
// chunked bodies with trailers (forwarded) and chunk extensions (ignored),
// absolute-form targets (routed by their host, RFC 9112 §3.2.2), `OPTIONS *`,
// a 408 after timeouts.header, `Expect: 100-continue` answered only once the
// request was routed and allowed (client.ts). Its cost: about twice
// uWS's CPU per request (bench/RESULTS.md, "HTTP engines").
//
// Connections are accepted by a plain net.Server and handed to the
// node:http(s) server (which listens on nothing): counted there (stub_status,
// global.max_connections) as uWS's App.filter counts them, and on https first
// read for tls-alpn-01 (tls-alpn.ts). Every worker listens on the address
// with SO_REUSEPORT where Node has it (net's reusePort: Node 22.12 and 23.1 on);
// on older Node only worker 0 does (listeners.ts), as for TCP entry points.
import http from 'node:http'
import https from 'node:https'
import net from 'node:net'
import type { Duplex } from 'node:stream'
import type { TlsConf } from '../../../config/tls.js'
import { type ErrorCode, ERRORS, formatError } from '../../../errors.js'
import { canonicalIp } from '../../../net/ip.js'
import { boundPort } from '../../../net/listen.js'
import type { AcmeAlpnChallenge } from '../../../protocol.js'
import type { Connections } from '../../connections.js'
import { Ctx } from '../../request/context.js'
import type { Listener, RequestHandler, SentCounter } from '../listen-options.js'
import { NodeClient, NodeConn, fromWire } from './client.js'
import { acceptWebSocket } from './ws.js'
import { hostProblem } from '../../request/request-host.js'
import { expectsBody, readHeader } from '../request-read.js'
import { statusLine } from '../response-head.js'
import { AlpnChallenges } from '../../tls/tls-alpn.js'
import { loadContexts, sniContext } from '../../tls/tls-contexts.js'

const [MAJOR = 0, MINOR = 0] = process.versions.node.split('.').map(Number)
/** Node can put several listening sockets on one address (SO_REUSEPORT), so that every worker listens (net.Server reusePort) */
export const NODE_REUSE_PORT = MAJOR > 23 || (MAJOR === 23 && MINOR >= 1) || (MAJOR === 22 && MINOR >= 12)

/** how often node:http looks for heads past timeouts.header (ms): a 408 comes at most this late */
const CHECK_MS = 500
/**
 * llhttp's limit on a request head (bytes): twice limits.max_header_bytes, as uWS's (loadUws in ../uws/native.ts), so that a
 * head over the setting reaches request-check.ts, whose 431 names it; set once at start (setNodeHeadLimit).
 */
let maxHeadBytes = 2 * 16 * 1024

/** Sets the node engine's head limit from limits.max_header_bytes, before its servers are made. */
export function setNodeHeadLimit (bytes: number): void { maxHeadBytes = 2 * bytes }

export interface NodeOptions {
  readonly entrypoint: string
  /** https: these certificates (with their SNI ones), node:tls settings as everywhere (tls-contexts.ts); null = plain http */
  readonly tls: TlsConf | null
  /** largest WebSocket message a client may send */
  readonly wsMaxMessage: number
  readonly conns: Connections | null
  readonly sent: SentCounter | null
}

export interface NodeListener extends Listener {
  /** Serves these certificates to new handshakes (established connections keep theirs); throws on unusable files, keeping the current ones. */
  refresh (conf: TlsConf): void
  /** The tls-alpn-01 challenges to answer from now on (https only). */
  setChallenges (challenges: Readonly<Record<string, AcmeAlpnChallenge>>): void
}

/** [timeouts.header, timeouts.client_keep_alive] in ms, for every node:http server of this thread */
let timeouts = [30_000, 65_000]
const servers = new Set<http.Server>()
const applyTimeouts = (s: http.Server): void => {
  s.headersTimeout = timeouts[0]!
  s.keepAliveTimeout = timeouts[1]!
}

/** Sets the client time-outs of the node engine (ms): a head not complete after headerMs gets 408; an idle keep-alive connection closes after keepAliveMs. */
export function setNodeTimeouts (headerMs: number, keepAliveMs: number): void {
  timeouts = [headerMs, keepAliveMs]
  servers.forEach(applyTimeouts)
}

const CONN = Symbol('lb.conn')
type Sock = Duplex & { [CONN]?: NodeConn, remoteAddress?: string, _httpMessage?: http.ServerResponse | null }

/** The connection's state, made at its first request. */
function connOf (sock: Sock): NodeConn {
  let c = sock[CONN]
  if (c === undefined) {
    const conn = new NodeConn(canonicalIp(sock.remoteAddress ?? ''))
    sock[CONN] = conn
    sock.once('close', () => conn.closed())
    c = conn
  }
  return c
}

const TEXT = ['content-type', 'text/plain'] as const
const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)(.*)$/s

/** What the data plane needs of a request, as the uWS adapter reads it (uws/app.ts readRequest). */
function readRequest (req: http.IncomingMessage, entrypoint: string, proto: 'http' | 'https', conn: NodeConn): Ctx {
  const ctx = new Ctx()
  ctx.method = req.method ?? ''
  ctx.entrypoint = entrypoint
  ctx.proto = proto
  ctx.remoteAddress = conn.remote
  ctx.http10 = req.httpVersionMinor === 0
  let url = req.url ?? ''
  // absolute-form (RFC 9112 §3.2.2): the target's authority is the Host, whatever Host header came with it
  let authority: string | null = null
  if (url.charCodeAt(0) !== 0x2f) {
    const m = ABSOLUTE.exec(url)
    if (m !== null) {
      authority = m[1]!
      url = m[2]!.charCodeAt(0) === 0x2f ? m[2]! : '/' + m[2]!
    }
  }
  url = fromWire(url)
  const q = url.indexOf('?')
  ctx.path = q < 0 ? url : url.slice(0, q)
  ctx.query = q < 0 ? '' : url.slice(q + 1)
  const raw = req.rawHeaders
  const headers = ctx.headers
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = raw[i]!.toLowerCase()
    if (authority !== null && k === 'host') continue
    const v = fromWire(raw[i + 1]!)
    headers.push(k, v)
    readHeader(ctx, k, v)
  }
  if (authority !== null) {
    // the Host lines still count (RFC 9112 §3.2): two of them, or one that is not a host, is a 400 (kept for the checks)
    let hosts = 0
    let bad = false
    for (let i = 0; i + 1 < raw.length; i += 2) {
      if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') {
        hosts++
        bad ||= hostProblem(raw[i + 1]!) !== ''
      }
    }
    if (hosts > 1 || bad) {
      for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === 'host') headers.push('host', raw[i + 1]!)
    } else {
      headers.push('host', authority)
      readHeader(ctx, 'host', authority)
    }
  }
  return ctx
}

/** A whole answer written on the socket itself (no request to hand it to): status, an lb error text, Connection: close. */
function rawAnswer (code: ErrorCode, params: Record<string, string | number>): string {
  const body = formatError(code, params) + '\n'
  return `HTTP/1.1 ${statusLine(ERRORS[code].status, '')}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
}

/** The answer to what llhttp or node:http refused before there was a request: '' for a connection error (nothing to answer). */
function parseErrorAnswer (err: Error & { code?: string, reason?: string }): string {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return rawAnswer('LB_ERR_HEADER_TIMEOUT', { timeout: `${timeouts[0]! / 1000}s` })
    case 'HPE_HEADER_OVERFLOW':
      return rawAnswer('LB_ERR_HEAD_TOO_LARGE', { bytes: `more than ${maxHeadBytes}`, limit: maxHeadBytes / 2 })
    default:
      return err.code?.startsWith('HPE_') === true ? rawAnswer('LB_ERR_BAD_REQUEST', { reason: `${err.reason ?? err.code} (llhttp ${err.code})` }) : ''
  }
}

/**
 * A request llhttp could not read, or a head past timeouts.header: answered
 * after the answers to the requests before it on the connection (never in
 * the middle of them), then the connection is closed.
 */
function onClientError (err: Error & { code?: string, reason?: string }, socket: Duplex, sent: SentCounter | null): void {
  const sock = socket as Sock & net.Socket
  const answer = parseErrorAnswer(err)
  const close = (): void => {
    const res = sock._httpMessage
    if (answer !== '' && sock.writable && (res == null || !res.headersSent)) {
      sent?.add(answer.length) // ASCII: its length is its size
      sock.write(answer)
    }
    sock.destroySoon()
  }
  const conn = sock[CONN]
  // in a body still being read (bad trailers, a broken chunk): that request can never be complete, so no waiting
  if (answer === '' || conn === undefined || conn.live.size === 0 || !conn.allRead()) close()
  else conn.whenIdle(close)
}

export async function listenNode (host: string, port: number, handler: RequestHandler, o: NodeOptions): Promise<NodeListener | null> {
  const proto = o.tls === null ? 'http' : 'https'
  const options: http.ServerOptions = {
    requestTimeout: 0, // a body's pace is the proxy's (timeouts.client)
    connectionsCheckingInterval: CHECK_MS,
    maxHeaderSize: maxHeadBytes,
    insecureHTTPParser: false,
    joinDuplicateHeaders: false,
    noDelay: true,
  }
  let contexts = o.tls === null ? null : loadContexts(o.tls)
  const mtls = o.tls !== null && o.tls.ca !== ''
  const server = contexts === null
    ? http.createServer(options)
    : https.createServer({
      ...options,
      ...contexts.main,
      requestCert: mtls,
      rejectUnauthorized: mtls, // no certificate, or one that does not chain to `ca`: the handshake fails
      handshakeTimeout: timeouts[0],
      // HTTP/1.1, or 1.0 for a client that offers only that (curl -0); none offered, or only h2: no ALPN (as uWS)
      ALPNCallback: ({ protocols }) => protocols.includes('http/1.1') ? 'http/1.1' : protocols.includes('http/1.0') ? 'http/1.0' : undefined,
      SNICallback: (name, cb) => cb(null, contexts === null ? undefined : sniContext(contexts, name)),
    })
  applyTimeouts(server)
  servers.add(server)
  // node:http starts timing heads (headersTimeout) when its server starts listening; this one never listens itself
  server.emit('listening')
  server.on('tlsClientError', (_err: Error, sock: Duplex) => { sock.destroy() })
  server.on('clientError', (err: Error, sock: Duplex) => onClientError(err, sock, o.sent))

  const serve = (req: http.IncomingMessage, res: http.ServerResponse, expect: boolean): void => {
    const conn = connOf(req.socket as Sock)
    if (conn.closing) return // an answer that closes the connection is on its way: nothing behind it is served
    const ctx = readRequest(req, o.entrypoint, proto, conn)
    const client = new NodeClient(req, res, conn, ctx.asksClose, expect, o.sent)
    // llhttp reads "HTTP/0.9" and "HTTP/2.0" request lines too: only HTTP/1.x is spoken here (nginx answers the same)
    if (req.httpVersionMajor !== 1) client.send(505, TEXT, formatError('LB_ERR_HTTP_VERSION', { version: `${req.httpVersionMajor}.${req.httpVersionMinor}` }) + '\n', true)
    else handler(ctx, client)
  }
  server.on('request', (req, res) => serve(req, res, false))
  server.on('checkContinue', (req, res) => serve(req, res, true)) // any other Expect: node:http answers 417
  // Upgrade (and CONNECT, refused with 501 by the request checks): the socket is node:http's no more. A WebSocket
  // upgrade is answered by ws-proxy.ts through ws.ts; anything else is answered as HTTP and the connection closed.
  const upgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.pause() // nothing of it is read until the server accepted the WebSocket
    const conn = connOf(socket as Sock)
    const res = new http.ServerResponse(req)
    res.shouldKeepAlive = false
    res.assignSocket(socket as net.Socket)
    res.once('finish', () => { (socket as net.Socket).destroySoon() })
    const ctx = readRequest(req, o.entrypoint, proto, conn)
    const ws = req.method === 'GET' && ctx.header('upgrade').toLowerCase() === 'websocket'
    const client = new NodeClient(req, res, conn, true, false, o.sent,
      ws ? (session, _key, protocol, headers) => acceptWebSocket(req, socket, head, o.wsMaxMessage, session, protocol, headers) : null)
    if (!ws && expectsBody(ctx) && req.method !== 'CONNECT') {
      // node:http hands over such a request's body unparsed: it cannot be forwarded
      client.send(400, TEXT, formatError('LB_ERR_BAD_REQUEST', { reason: 'a request body with an Upgrade other than websocket' }) + '\n', true)
      return
    }
    handler(ctx, client)
  }
  server.on('upgrade', upgrade)
  server.on('connect', upgrade)

  const alpn = contexts === null ? null : new AlpnChallenges(o.entrypoint)
  const toServer = (sock: net.Socket): void => { server.emit('connection', sock) }
  const conns = o.conns
  const listener = net.createServer({ noDelay: true }, (sock) => {
    if (conns !== null) {
      sock.once('close', () => conns.close())
      if (!conns.open()) { // over global.max_connections
        sock.destroy()
        return
      }
    }
    if (alpn === null) toServer(sock)
    else alpn.accept(sock, toServer, timeouts[0]!)
  })
  const bound = await new Promise<boolean>((resolve) => {
    listener.once('error', () => resolve(false))
    listener.listen({ host, port, backlog: 511, reusePort: NODE_REUSE_PORT } as net.ListenOptions, () => resolve(true))
  })
  if (!bound) {
    servers.delete(server)
    server.close()
    return null
  }
  listener.on('error', () => { /* accept errors (EMFILE...): the connection is dropped, the listener goes on */ })
  return {
    port: boundPort(listener),
    close: () => { listener.close() }, // established connections carry on
    refresh: (conf: TlsConf) => {
      const next = loadContexts(conf)
      contexts = next;
      (server as https.Server).setSecureContext(next.main)
    },
    setChallenges: (c) => alpn?.set(c),
  }
}
