// The only importer of uWebSockets.js. It copies each request into a Ctx
// synchronously (uWS request objects live only during the callback), attaches
// onAborted at once, corks every write made outside the request callback, and
// streams bodies with tryEnd/onWritable (known length) or write (chunked) with
// backpressure reported to the caller. It also starts the TLS apps (SSLApp,
// SNI) and hands WebSocket upgrades and events to the data plane through the
// interfaces of ws-client.ts.
import { existsSync, readFileSync } from 'node:fs'
import net from 'node:net'
import { createRequire } from 'node:module'
import { constants } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { STATUS_CODES } from 'node:http'
import type { AppOptions, HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_listen_socket, us_socket_context_t } from 'uWebSockets.js'
import type { TlsConf } from '../config/tls.js'
import { lbError } from '../errors.js'
import { canonicalIp, formatIp } from '../net/ip.js'
import { type AtTurnEnd, atTurnEnd, currentTurn } from '../net/turn.js'
import type { ClientResponse } from './client.js'
import { Ctx } from './context.js'
import type { Connections } from './connections.js'
import type { ClientWebSocket, WebSocketUpgrade, WsSession } from './ws-client.js'

type Uws = typeof import('uWebSockets.js')

/** lb's folder (http.js is dist/core/worker/http.js): native/ holds the binaries' record and lb's patched copy. */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

/** The systems and runtimes uWebSockets.js 20.57 has binaries for, as the refusal line says it. */
const SUPPORTED = 'Node.js 20, 22 or 24 LTS (or 25) on Linux x64/arm64 with glibc 2.38 or newer ' +
  '(2.36 and 2.37 once lb\'s install step has patched its copy, which needs a C compiler), macOS or Windows'

/**
 * Loads uWS's native binary. On glibc 2.36-2.37 lb's install step
 * (scripts/uws-native.mjs) made native/build/<version>/: the binary with its
 * GLIBC_2.38 version need marked weak, and a shim library of the three C23
 * functions it calls that this glibc lacks. The shim is loaded first, into the
 * global symbol scope, then the copy with RTLD_NOW so that a missing symbol is
 * an error here and never a crash at its first call. Elsewhere the package's
 * binary loads as it is. v20.57 has no JS fallback: a binary that does not load
 * is one start-up error line that says which systems and Node versions work.
 */
export function loadUws (): Uws {
  const require = createRequire(import.meta.url)
  const name = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`
  const { version } = JSON.parse(readFileSync(join(ROOT, 'native', 'uws.json'), 'utf8')) as { version: string }
  const dir = join(ROOT, 'native', 'build', version)
  try {
    if (!existsSync(join(dir, name))) return require('uWebSockets.js') as Uws
    const { RTLD_NOW, RTLD_GLOBAL } = constants.dlopen as { RTLD_NOW: number, RTLD_GLOBAL: number }
    process.dlopen({ exports: {} }, join(dir, 'libisoc23.so'), RTLD_NOW | RTLD_GLOBAL)
    const m = { exports: {} }
    process.dlopen(m, join(dir, name), RTLD_NOW)
    return m.exports as Uws
  } catch (err) {
    const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime
    const system = `${process.platform} ${process.arch}${glibc === undefined ? '' : `, glibc ${glibc}`}`
    // the package's own message is several lines, the loader's reason among them ("Error: Cannot find module ...")
    const lines = (err as Error).message.split('\n')
    const why = (lines.find((l) => l.startsWith('Error: ')) ?? lines[0]!).replace(/^Error: /, '')
    const fix = /GLIBC_2\.3[89]/.test(why) ? ` (run \`node ${join(ROOT, 'scripts', 'uws-native.mjs')}\` to patch lb's copy)` : ''
    throw lbError('LB_ERR_UWS_UNSUPPORTED', { version, runtime: `Node.js ${process.version} (ABI ${process.versions.modules}) on ${system}: ${why}${fix}`, supported: SUPPORTED })
  }
}

const STATUS_LINE: string[] = []
for (const [code, text] of Object.entries(STATUS_CODES)) STATUS_LINE[Number(code)] = `${code} ${text}`

function statusLine (status: number, reason: string): string {
  const std = STATUS_LINE[status]
  if (std !== undefined && (reason === '' || (std.length === reason.length + 4 && std.endsWith(reason)))) return std
  return `${status} ${reason === '' ? 'Unknown' : reason}`
}

const decoder = new TextDecoder()
const EMPTY: readonly string[] = []

/**
 * Writes status and headers; must run corked. `close`: the connection closes
 * after this response (the client sent Connection: close, or lb closes it).
 * uWS closes but, unlike nginx and HAProxy, does not say so (RFC 9112 §9.6:
 * the server SHOULD); clients such as wrk would otherwise send their next
 * request into a closing connection.
 *
 * The whole head goes to uWS in one writeStatus call: uWS writes
 * "HTTP/1.1 " + status + CRLF, so the header lines ride along after the status
 * text. Each call into uWS costs a JS→C++ crossing and two string conversions;
 * one per header was a measurable share of a proxied request. Invariant: no
 * name or value contains CR or LF (the upstream parser rejects such heads,
 * config values are validated, and uWS drops requests whose line or headers hold
 * a bare CR or LF, so none reaches a redirect's Location: test/plugins/redirect-scheme.test.ts);
 * a line break would be header injection with writeHeader too.
 */
function writeHead (res: HttpResponse, status: number, reason: string, headers: readonly string[], close: boolean, length = -1): number {
  let head = statusLine(status, reason)
  for (let i = 0; i < headers.length; i += 2) head += '\r\n' + headers[i]! + ': ' + headers[i + 1]!
  if (length >= 0) head += '\r\ncontent-length: ' + length
  if (close) head += '\r\nconnection: close'
  res.writeStatus(head)
  return head.length + UWS_HEAD
}

// What uWS 20.57 writes of a response beyond lb's head string and the body,
// in bytes, as captured on a raw socket (test/admin/bytes-out.test.ts checks
// the sum): writeHead's head is the text of a status line and header lines.
// Its size is its .length: header text is ASCII but for rare values (an
// upstream's non-ASCII value is sent as UTF-8, one byte more per such
// character, not counted; measuring UTF-8 costs ~100 ns a head).
/** "HTTP/1.1 " + head + CRLF, "Date: <IMF-fixdate, 29 chars>\r\n", "uWebSockets: 20\r\n" */
const UWS_HEAD = 9 + 2 + 37 + 17
/** "Connection: close\r\n": end(…, true) and endWithoutBody(n, true) write it unless the request asked for the close */
const UWS_CLOSE = 19
/** "\r\n" ending the head of endWithoutBody() */
const UWS_NO_LENGTH = 2
/** "Transfer-Encoding: chunked\r\n\r\n", before the first write() */
const UWS_CHUNKED = 30
/** "0\r\n\r\n": end() after write() */
const UWS_LAST_CHUNK = 5

/** "Content-Length: n\r\n\r\n": end(body), tryEnd, endWithoutBody(n) and an end() with nothing written */
function uwsLength (n: number): number {
  let digits = 1
  while (n >= 10) { n = Math.floor(n / 10); digits++ }
  return 20 + digits
}

/** "<hex size>\r\n" + CRLF around a chunk of n > 0 bytes written with write() (nothing for n = 0) */
function uwsChunk (n: number): number {
  if (n === 0) return 0
  let digits = 1
  while (n >= 16) { n = Math.floor(n / 16); digits++ }
  return digits + 4
}

/** Counts the bytes written to one entry point's clients beyond bodies (core/worker/sent-bytes.ts). */
export interface SentCounter {
  add (bytes: number): void
}

/**
 * Whole response bodies wait here for the end of the loop turn (core/net/turn.ts),
 * copied out of the upstream read buffer they arrived in; the space is reused
 * from its start every turn. A body longer than STAGE_MAX, or one that no longer
 * fits this turn, is written at once (uWS does not cork more than 16 KiB either).
 */
const STAGING = Buffer.allocUnsafe(256 * 1024)
const STAGE_MAX = 16 * 1024
let stagingUsed = 0
let stagingTurn = -1

class UwsClient implements ClientResponse, WebSocketUpgrade, AtTurnEnd {
  readonly #res: HttpResponse
  aborted = false
  started = false
  readonly websocket: WebSocketUpgrade | null
  /** the WebSocket route's context, needed by res.upgrade; null for plain requests */
  readonly #wsContext: us_socket_context_t | null
  #ended = false
  #abortCb: (() => void) | null = null
  /** request body reading is paused (upstream backpressure); resumed before the response ends so uWS can drain the rest */
  #bodyPaused = false
  #bodyCb: ((chunk: Buffer, last: boolean) => void) | null = null
  #early: Array<{ chunk: Buffer, last: boolean }> | null = null
  #drainCb: (() => void) | null = null
  // response body state
  #total = -1 // Content-Length being streamed with tryEnd, or -1 for chunked writes
  /** response head deferred until the first body bytes or the end (#hasHead) */
  #hasHead = false
  #status = 0
  #reason = ''
  #headers: readonly string[] = EMPTY
  #pending: Buffer[] | null = null // tryEnd mode: copies not yet accepted by uWS
  #pendingOffset = 0 // write offset at which pending[0] starts
  /** the whole body, staged for the end of the turn: STAGING[#stagedAt, #stagedAt + #total) */
  #stagedAt = -1

  readonly #headRequest: boolean
  /** the request said Connection: close */
  readonly #asksClose: boolean
  readonly #sent: SentCounter | null
  /** uWS wrote the head's framing line (Transfer-Encoding or Content-Length) */
  #framed = false

  constructor (res: HttpResponse, expectBody: boolean, headRequest: boolean, asksClose: boolean, sent: SentCounter | null,
    wsContext: us_socket_context_t | null = null) {
    this.#res = res
    this.#sent = sent
    this.#headRequest = headRequest
    this.#asksClose = asksClose
    this.#wsContext = wsContext
    this.websocket = wsContext === null ? null : this
    res.onAborted(() => {
      this.aborted = true
      const cb = this.#abortCb
      this.#abortCb = null
      if (cb !== null && !this.#ended) cb()
    })
    if (expectBody) {
      res.onData((ab, last) => {
        const cb = this.#bodyCb
        if (cb !== null) {
          cb(Buffer.from(ab), last)
          return
        }
        // no consumer yet (a middleware is still deciding): keep a copy, the ArrayBuffer is neutered on return
        ;(this.#early ??= []).push({ chunk: Buffer.from(ab.slice(0)), last })
      })
    }
  }

  onAbort (cb: () => void): void { this.#abortCb = cb }

  onBody (cb: (chunk: Buffer, last: boolean) => void): void {
    this.#bodyCb = cb
    const early = this.#early
    this.#early = null
    if (early !== null) for (const e of early) cb(e.chunk, e.last)
  }

  pauseBody (): void {
    if (this.aborted || this.#ended) return
    this.#bodyPaused = true
    this.#res.pause()
  }

  resumeBody (): void {
    if (this.aborted || this.#ended || !this.#bodyPaused) return
    this.#bodyPaused = false
    this.#res.resume()
  }

  head (status: number, reason: string, headers: readonly string[], contentLength: number): void {
    this.started = true
    this.#total = contentLength
    // Deferred until the first body bytes or the end, so that a small response
    // goes out as one corked write (status, headers and body together).
    this.#hasHead = true
    this.#status = status
    this.#reason = reason
    this.#headers = headers
  }

  body (buf: Buffer, start: number, end: number): boolean {
    if (this.aborted || this.#ended) return true
    if (this.#pending !== null) {
      this.#pending.push(Buffer.from(buf.subarray(start, end)))
      return false
    }
    if (this.#hasHead && end - start === this.#total) {
      // the whole body in one piece (the common small response): head and body in one write,
      // staged for the end of the turn when it fits there
      this.resumeBody()
      this.#ended = true
      if (!this.#stage(buf, start, end)) this.#writeWhole(buf.subarray(start, end))
      return true
    }
    let ok = true
    this.#res.cork(() => {
      const res = this.#res
      this.#flushHead()
      const view = buf.subarray(start, end)
      if (this.#total < 0) {
        this.#count((this.#framed ? 0 : UWS_CHUNKED) + uwsChunk(view.length))
        this.#framed = true
        ok = res.write(view)
        return
      }
      if (!this.#framed) this.#count(uwsLength(this.#total))
      this.#framed = true
      const offset = res.getWriteOffset()
      const [sent, done] = res.tryEnd(view, this.#total)
      if (done) this.#ended = true
      else if (!sent) {
        ok = false
        this.#pending = [Buffer.from(view)]
        this.#pendingOffset = offset
      }
    })
    if (!ok) this.#watchWritable()
    return ok
  }

  /** Copies a whole body into this turn's staging space and queues it for turnEnd; false if it does not fit. */
  #stage (buf: Buffer, start: number, end: number): boolean {
    const n = end - start
    if (stagingTurn !== currentTurn()) {
      stagingTurn = currentTurn()
      stagingUsed = 0
    }
    if (n > STAGE_MAX || stagingUsed + n > STAGING.length) return false
    buf.copy(STAGING, stagingUsed, start, end)
    this.#stagedAt = stagingUsed
    stagingUsed += n
    atTurnEnd(this)
    return true
  }

  turnEnd (): void {
    if (!this.aborted) this.#writeWhole(STAGING.subarray(this.#stagedAt, this.#stagedAt + this.#total))
  }

  /** The deferred head and the whole body, ending the response, in one corked write. */
  #writeWhole (body: Buffer): void {
    this.#res.cork(() => {
      this.#flushHead()
      this.#count(uwsLength(body.length))
      this.#res.end(body)
    })
  }

  /** Writes the deferred head if there is one (corked); true if it did. */
  #flushHead (): boolean {
    if (!this.#hasHead) return false
    this.#hasHead = false
    this.#count(writeHead(this.#res, this.#status, this.#reason, this.#headers, this.#asksClose))
    this.#headers = EMPTY
    return true
  }

  /** Bytes about to be written beyond the body; called before the write, inside the cork. */
  #count (bytes: number): void {
    if (this.#sent !== null) this.#sent.add(bytes)
  }

  #watchWritable (): void {
    this.#res.onWritable((offset) => {
      if (this.aborted) return true
      const p = this.#pending
      if (p !== null) {
        // tryEnd mode: resend from the first byte uWS did not take
        while (p.length > 0) {
          const chunk = p[0]!.subarray(offset - this.#pendingOffset)
          const [sent, done] = this.#res.tryEnd(chunk, this.#total)
          if (done) {
            this.#ended = true
            p.length = 0
            break
          }
          if (!sent) return false
          offset = this.#res.getWriteOffset()
          this.#pendingOffset = offset
          p.shift()
        }
        this.#pending = null
      }
      const cb = this.#drainCb
      if (cb !== null) cb()
      return true
    })
  }

  onDrain (cb: () => void): void { this.#drainCb = cb }

  end (): void {
    if (this.aborted || this.#ended) return
    if (this.#pending !== null) {
      // tryEnd completes the response by itself once the last pending byte is taken
      return
    }
    this.resumeBody()
    this.#ended = true
    this.#res.cork(() => {
      const res = this.#res
      if (this.#hasHead && (this.#headRequest || this.#status === 204 || this.#status === 304)) {
        // No body, and no Content-Length: 0 from uWS: a HEAD gets the length it was given, a 304 the
        // server's if any, a 204 none (head() was given -1; RFC 9110 §8.6, §15.4.5). The length goes in
        // the head: this build's endWithoutBody(n) closes a keep-alive connection when n > 0.
        this.#hasHead = false
        this.#count(writeHead(res, this.#status, this.#reason, this.#headers, this.#asksClose, this.#total) + UWS_NO_LENGTH)
        this.#headers = EMPTY
        res.endWithoutBody()
        return
      }
      this.#flushHead()
      // after write(): the last chunk; with nothing written: "Content-Length: 0"; after tryEnd: nothing more
      if (this.#total < 0 || !this.#framed) this.#count(this.#framed ? UWS_LAST_CHUNK : uwsLength(0))
      res.end()
    })
  }

  send (status: number, headers: readonly string[], body: string, close = false): void {
    if (this.aborted || this.#ended) return
    this.started = true
    this.resumeBody()
    this.#ended = true
    // Decided inside the request callback: uWS goes on parsing what the client
    // already sent after this request and would hand lb the next request even
    // though this answer closes the connection (a smuggled request after a
    // framing error). Answered on the next turn instead, with this response
    // still pending, uWS reads nothing more: it ends the connection itself
    // when another request follows in those bytes (no answer then, nothing
    // forwarded), and closes it right after this answer otherwise.
    if (close && this === handling) setImmediate(() => { if (!this.aborted) this.#sendNow(status, headers, body, true) })
    else this.#sendNow(status, headers, body, close)
  }

  #sendNow (status: number, headers: readonly string[], body: string, close: boolean): void {
    this.#res.cork(() => {
      if (this.#headRequest && !close) {
        // the length in the head, not endWithoutBody(n): see end()
        this.#count(writeHead(this.#res, status, '', headers, this.#asksClose, Buffer.byteLength(body)) + UWS_NO_LENGTH)
        this.#res.endWithoutBody()
        return
      }
      // `close` makes uWS write "Connection: close" itself, unless the client asked for the close
      const head = writeHead(this.#res, status, '', headers, this.#asksClose) + (close && !this.#asksClose ? UWS_CLOSE : 0)
      this.#count(head + uwsLength(Buffer.byteLength(body)))
      if (this.#headRequest) this.#res.endWithoutBody(Buffer.byteLength(body), close)
      else this.#res.end(body, close)
    })
  }

  bodyBytes (body: string): number {
    return this.aborted || this.#ended || this.#headRequest ? 0 : Buffer.byteLength(body)
  }

  destroy (): void {
    if (this.aborted || this.#ended) return
    this.#ended = true
    this.#res.close()
  }

  accept (session: WsSession, key: string, protocol: string, headers: readonly string[]): boolean {
    if (this.aborted || this.#ended || this.#wsContext === null) return false
    this.started = true
    this.#ended = true // the HttpResponse is gone once upgraded
    const ctx = this.#wsContext
    const upgrade = (): void => {
      const res = this.#res
      // custom headers on a 101 need the status written first (uWS docs)
      writeHead(res, 101, '', headers, false)
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
 * A WebSocket this thread holds open to itself, only ever corked: the way
 * around a bug of this uWS build. An upgrade made after the upgrade handler
 * returned (ours wait for the server's 101) must run in res.cork (else uWS
 * prints a warning per call), and HttpResponse::cork, once its callback
 * returns, reads the HTTP response state of a socket that upgrade() has just
 * turned into a WebSocket, reallocated in place: when the bytes there happen to
 * say "Connection: close", it closes the new WebSocket at once (the client
 * sees its 101, then 1006). Fixed upstream in uWebSockets PR #1929, but not
 * in uWebSockets.js 20.57: without the anchor, 2 of 16 runs of
 * test/ws/ws.test.ts saw a new WebSocket closed so. While another socket of the loop is corked,
 * res.cork skips its own corking and that check, and still counts as corked
 * for the warning: so upgrades run inside corkAnchor.cork(). Their few writes
 * then go out uncorked, which costs some syscalls per upgrade, not per message.
 * null until started (startCorkAnchor) or if the anchor closed: upgrades then
 * take the plain path.
 */
let corkAnchor: WebSocket<unknown> | null = null
let anchorStarted: Promise<void> | null = null

/**
 * Connects this thread's cork anchor: a uWS app on an ephemeral loopback port,
 * one node:net WebSocket handshake to it, then the port is closed again so no
 * one else can connect. Resolves once the anchor is open, or once connecting
 * it failed (upgrades then take the plain path).
 */
function startCorkAnchor (uws: Uws): Promise<void> {
  if (anchorStarted !== null) return anchorStarted
  anchorStarted = new Promise((resolve) => {
    const app = uws.App()
    apps.push(app)
    let token: us_listen_socket | false = false
    const done = (): void => {
      if (token !== false) uws.us_listen_socket_close(token)
      token = false
      resolve()
    }
    app.ws('/*', {
      compression: uws.DISABLED,
      maxPayloadLength: 16, // it never sends anything; more closes it
      idleTimeout: 0,
      sendPingsAutomatically: false,
      open: (ws: WebSocket<unknown>) => {
        corkAnchor ??= ws
        done()
      },
      close: (ws: WebSocket<unknown>) => { if (ws === corkAnchor) corkAnchor = null },
    })
    app.listen('127.0.0.1', 0, (t: us_listen_socket | false) => {
      if (t === false) {
        resolve()
        return
      }
      token = t
      const sock = net.connect(uws.us_socket_local_port(t), '127.0.0.1', () => {
        sock.write('GET / HTTP/1.1\r\nhost: anchor\r\nupgrade: websocket\r\nconnection: Upgrade\r\n' +
          'sec-websocket-key: bGItY29yay1hbmNob3IhIQ==\r\nsec-websocket-version: 13\r\n\r\n')
      })
      sock.unref() // never keeps the thread alive
      sock.on('error', done)
      sock.on('close', done)
      sock.resume() // the 101 and nothing else: read and dropped
    })
  })
  return anchorStarted
}

interface WsUserData { readonly session: WsSession }

/** The fragment sends exist in the binary (uWS WebSocket::sendFirstFragment...) but not in its type definitions. */
type FragmentingWebSocket = WebSocket<WsUserData> & Pick<ClientWebSocket, 'sendFirstFragment' | 'sendFragment' | 'sendLastFragment'>

export type RequestHandler = (ctx: Ctx, client: ClientResponse) => void

/** The client whose request callback is running (null outside one): see UwsClient.send. */
let handling: UwsClient | null = null

/** Runs the data plane's handler inside uWS's request callback. */
function handle (handler: RequestHandler, ctx: Ctx, client: UwsClient): void {
  handling = client
  handler(ctx, client)
  handling = null
}

const apps: TemplatedApp[] = []

/**
 * Closes every app of this thread with all its connections. A worker thread
 * must call this before it ends (process 'exit'): ending with uWS sockets still
 * registered in the thread's libuv loop trips a libuv assertion that aborts the
 * whole process, not just the thread.
 */
export function closeAllApps (): void {
  for (const app of apps.splice(0)) app.close()
}

export interface Listener {
  close (): void
}

export interface ListenOptions {
  /** https: an SSLApp with these files (its `ca` is not given to uWS, see listeners.ts); null = plain */
  readonly tls: TlsConf | null
  /** listen on this unix socket instead of host:port (the internal hop behind the mTLS terminator) */
  readonly unixPath: string
  /** the peer is lb's own TLS terminator: the client address comes from the PROXY v2 header it sends */
  readonly proxied: boolean
  /** largest WebSocket message a client may send; 0 = no WebSocket route */
  readonly wsMaxMessage: number
  /** counts this app's connections and enforces global.max_connections; null = not counted */
  readonly conns: Connections | null
  /** counts response heads and chunk framing sent to this entry point's clients; null = not counted */
  readonly sent: SentCounter | null
}

export const PLAIN: ListenOptions = Object.freeze({ tls: null, unixPath: '', proxied: false, wsMaxMessage: 0, conns: null, sent: null })

/** Set by readRequest: the request it just read said Connection: close (read right after, no allocation). */
let asksClose = false

/** Copies what the data plane needs of a uWS request (valid only during this callback) into a new Ctx. */
function readRequest (req: HttpRequest, res: HttpResponse, entrypoint: string, proto: 'http' | 'https', proxied: boolean): Ctx {
  const ctx = new Ctx()
  asksClose = false
  ctx.method = req.getCaseSensitiveMethod() // methods are case-sensitive (RFC 9110 §9.1): "get" is not GET
  ctx.path = req.getUrl()
  ctx.query = req.getQuery() ?? ''
  ctx.entrypoint = entrypoint
  ctx.proto = proto
  const headers = ctx.headers
  req.forEach((k, v) => {
    headers.push(k, v)
    if (k === 'content-length') {
      ctx.contentLength = /^\d+$/.test(v) ? Number(v) : -2
    } else if (k === 'transfer-encoding') {
      ctx.chunked = true
      ctx.contentLength = -1
    } else if (k === 'host') {
      ctx.host = hostOf(v)
    } else if (k === 'connection' && /(?:^|,)\s*close\s*(?:,|$)/i.test(v)) {
      asksClose = true
    }
  })
  ctx.remoteAddress = proxied ? canonicalIp(decoder.decode(res.getProxiedRemoteAddressAsText())) : peerText(res.getRemoteAddress())
  return ctx
}

// The last Host value this thread parsed, and its host name (port dropped,
// lower case): clients send the same Host request after request, so the
// lastIndexOf (a runtime call in V8, not a builtin) and the copies run only when it changes.
let lastHostValue = ''
let lastHost = ''

function hostOf (v: string): string {
  if (v !== lastHostValue) {
    const colon = v.lastIndexOf(':')
    lastHost = (colon > 0 && v.indexOf(']') < colon ? v.slice(0, colon) : v).toLowerCase()
    lastHostValue = v
  }
  return lastHost
}

// The last peer address this thread turned into text, as bytes and text: most
// requests arrive over a few keep-alive connections from a few clients, so the
// text is usually reused (uWS's own text form costs a sprintf and a decode each time).
const lastPeer = new Uint8Array(16)
let lastPeerLen = -1
let lastPeerText = ''

/** Canonical text of a peer address as uWS gives it: 4 bytes (IPv4) or 16 (IPv6, IPv4-mapped included). */
function peerText (ab: ArrayBuffer): string {
  const b = new Uint8Array(ab)
  const n = b.length
  if (n === lastPeerLen) {
    let i = 0
    while (i < n && b[i] === lastPeer[i]) i++
    if (i === n) return lastPeerText
  }
  const text = n === 4 ? `${b[0]!}.${b[1]!}.${b[2]!}.${b[3]!}` : n === 16 ? formatIp(b) : ''
  lastPeer.set(b)
  lastPeerLen = n
  lastPeerText = text
  return text
}

/** The body is read when one is announced (a valid positive Content-Length, or Transfer-Encoding). */
function expectsBody (ctx: Ctx): boolean {
  return ctx.chunked || ctx.contentLength > 0
}

/** uSockets options for one certificate: it sets the TLS 1.2 minimum itself (TLS 1.0/1.1 handshakes fail). */
function sslOptions (cert: string, key: string, ciphers: string): AppOptions {
  return { cert_file_name: cert, key_file_name: key, ssl_ciphers: ciphers }
}

/**
 * Starts a uWS app for one entry point. Every request is copied into a Ctx and
 * handed to `handler`; so is every WebSocket upgrade request, with a client
 * whose `websocket` is set. Resolves once listening (SO_REUSEPORT: every
 * worker listens on the same address and the kernel spreads connections).
 * An https app whose files cannot be used throws (uWS: "App construction
 * failed"); callers check the files first (core/config/tls.ts) for a precise message.
 */
export async function listenHttp (uws: Uws, host: string, port: number, entrypoint: string, proto: 'http' | 'https',
  handler: RequestHandler, opts: ListenOptions = PLAIN): Promise<Listener | null> {
  const tls = opts.tls
  if (opts.wsMaxMessage > 0) await startCorkAnchor(uws)
  const app = tls === null ? uws.App() : uws.SSLApp(sslOptions(tls.cert, tls.key, tls.ciphers))
  apps.push(app)
  const proxied = opts.proxied
  const conns = opts.conns
  const sent = opts.sent
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
      handle(handler, ctx, new UwsClient(res, expectsBody(ctx), ctx.method === 'HEAD', asksClose, sent))
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
          const ws = ctx.header('upgrade').toLowerCase() === 'websocket' ? context : null
          handle(handler, ctx, new UwsClient(res, expectsBody(ctx), false, asksClose, sent, ws))
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
  return new Promise((resolve) => {
    const done = (token: us_listen_socket | false): void => {
      if (token === false) {
        resolve(null)
        return
      }
      resolve({ close: () => uws.us_listen_socket_close(token) })
    }
    if (opts.unixPath !== '') app.listen_unix(done, opts.unixPath)
    else app.listen(host, port, done)
  })
}
