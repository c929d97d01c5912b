// One proxied WebSocket. DataPlane.handle routed the upgrade request like any
// other (routers, middlewares); here a server is picked with the service's
// balancer (in-flight counts in shm, passive failures, retries on connect
// failure), the upgrade request goes to it over a fresh node:net connection,
// and only once it answers 101 is the client's upgrade accepted. Any other
// answer is relayed to the client as an ordinary HTTP response.
//
// Then messages relay both ways:
// - server → client: frames are parsed from the socket's reads (one shared
//   read buffer per thread) and streamed to uWS as messages or fragments,
//   never reassembled. While uWS holds more than HIGH_WATER bytes for the
//   client, the server's socket is paused (resumed on drain).
// - client → server: uWS hands over whole messages (up to the entry point's
//   websocket_max_message) and cannot pause a WebSocket, so each message is
//   masked into one frame and written; bytes waiting for a slow server are
//   capped at twice that limit (LB_ERR_WS_BACKPRESSURE).
// Close codes and reasons pass through both ways. Pings pass through both
// ways; a client's ping is also answered by uWS itself, and the server's pong
// to it is dropped (uWS has no way to send a pong). The idle time-out
// (timeouts.tunnel: no byte either way) closes both sides with 1001.
//
// A tunnel belongs to its two sockets, not to a config generation: a reload
// swaps the DataPlane and leaves established tunnels alone.
import { createHash } from 'node:crypto'
import net from 'node:net'
import { now } from '../clock.js'
import { type AtTurnEnd, atTurnEnd } from '../net/turn.js'
import { type ErrorCode, formatError } from '../errors.js'
import { C_RESP_1XX, C_RETRIES, statusClass } from '../shm/layout.js'
import { noServerReason } from '../shm/server-why.js'
import type { ResponseHead } from '../plugin.js'
import { ResponseParser, type ResponseSink, MAX_HEAD_BYTES } from '../upstream/response-parser.js'
import { runResponseHooks } from './chain.js'
import { forwardHead } from './forward-head.js'
import type { ClientResponse } from './client.js'
import type { Ctx } from './context.js'
import type { ExchangeHost, RouteTarget, ServerRuntime, ServiceRuntime } from './runtime.js'
import type { ClientWebSocket, WebSocketUpgrade, WsSession } from './ws-client.js'
import { type FrameSink, FrameParser, NO_STATUS, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT, closePayload, encodeFrame, isWireCloseCode } from './ws-frame.js'

/** bytes uWS may hold for a client before the server's socket is paused */
const HIGH_WATER = 64 * 1024
/** after a close frame is sent to the server, how long it has to close its side */
const CLOSE_WAIT_MS = 5_000
const SWEEP_MS = 250
const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
const KEY = /^[A-Za-z0-9+/]{22}==$/
// request headers never forwarded: hop-by-hop, the ones set here, and extensions (never negotiated)
const DROP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade',
  'x-real-ip', 'x-forwarded-for', 'x-forwarded-proto', 'sec-websocket-extensions', 'content-length'])
const dropRequestHeader = (k: string): boolean => DROP.has(k)
// headers of the server's 101 that uWS writes itself or that must not reach the client
const DROP_101 = new Set(['connection', 'upgrade', 'sec-websocket-accept', 'sec-websocket-extensions', 'sec-websocket-protocol',
  'keep-alive', 'transfer-encoding', 'content-length', 'date'])
const EMPTY = new Uint8Array(0)
const IDLE_REASON = Buffer.from('idle timeout')
const SLOW_REASON = Buffer.from('server too slow')

/** every read from every server of this thread lands here (net onread): parsed and handed on before the next read */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024)

const PH_CONNECT = 0 // connecting to the server
const PH_HANDSHAKE = 1 // upgrade request sent, waiting for the head of the answer
const PH_RESPONSE = 2 // the server refused the upgrade: relaying its HTTP response
const PH_OPEN = 3 // relaying messages
const PH_CLOSING = 4 // a close frame went to the server: waiting for it to close

const tunnels = new Set<WsTunnel>()
let sweeper: NodeJS.Timeout | null = null

export class WsTunnel implements WsSession, FrameSink, ResponseSink, AtTurnEnd {
  readonly #dp: ExchangeHost
  readonly #ctx: Ctx
  readonly #client: ClientResponse
  readonly #upgrade: WebSocketUpgrade
  readonly #target: RouteTarget
  readonly #svc: ServiceRuntime
  readonly #key: string
  readonly #idleMs: number
  readonly #maxQueued: number
  #server: ServerRuntime | null = null
  #serverIdx = -1
  #attempts = 0
  #sock: net.Socket | null = null
  /** the server socket while corked until the end of this turn (#toServer) */
  #corked: net.Socket | null = null
  #phase = PH_CONNECT
  /** tick when the current phase times out */
  #deadline = 0
  /** head bytes of the server's answer split across reads */
  #head: Buffer | null = null
  #frames: FrameParser | null = null
  #response: ResponseParser | null = null
  #ws: ClientWebSocket | null = null
  /** the server's socket is paused until the client drains */
  #paused = false
  /** the server sent a close frame (so ours, if any, is the echo) */
  #serverClosed = false
  #closeSent = false
  #finished = false
  // the read being fed inside ws.cork (a bound function, not a closure per read)
  #readBuf: Buffer | null = null
  #readLen = 0
  #readErr: string | null = null
  readonly #feedCorked = (): void => { this.#readErr = this.#frames!.feed(this.#readBuf!, 0, this.#readLen) }

  /** `client` is a WebSocket upgrade (client.websocket set). */
  constructor (dp: ExchangeHost, ctx: Ctx, client: ClientResponse, target: RouteTarget) {
    this.#dp = dp
    this.#ctx = ctx
    this.#client = client
    this.#upgrade = client.websocket!
    this.#target = target
    this.#svc = target.service!
    this.#key = ctx.header('sec-websocket-key')
    this.#idleMs = dp.conf.timeouts.tunnelMs
    this.#maxQueued = 2 * dp.conf.entrypoints[ctx.epSlot]!.wsMaxMessage
  }

  start (): void {
    const ctx = this.#ctx
    if (!KEY.test(this.#key) || ctx.header('sec-websocket-version') !== '13') {
      this.#fail('LB_ERR_BAD_REQUEST', { reason: 'invalid WebSocket handshake (Sec-WebSocket-Key, Sec-WebSocket-Version: 13)' })
      return
    }
    this.#client.onAbort(() => this.#clientAborted())
    tunnels.add(this)
    if (sweeper === null) {
      sweeper = setInterval(sweep, SWEEP_MS)
      sweeper.unref()
    }
    this.#connect(-1, null)
  }

  // ---- handshake

  #connect (exclude: number, failed: ErrorCode | null): void {
    const svc = this.#svc
    const dp = this.#dp
    const idx = dp.claimServer(svc, this.#ctx.remoteAddress, exclude)
    if (idx < 0) {
      if (failed !== null) this.#fail(failed, {})
      else this.#fail('LB_ERR_NO_SERVER', { service: svc.conf.name, why: noServerReason(this.#dp.shm.i32, svc.servers, svc.conf.healthCheck, now()) })
      return
    }
    const server = svc.servers[idx]!
    this.#server = server
    this.#serverIdx = idx
    this.#ctx.server = server.conf.name
    this.#attempts++
    this.#phase = PH_CONNECT
    this.#deadline = now() + dp.conf.timeouts.connectMs
    const onread = { buffer: READ_BUFFER, callback: (n: number, buf: Uint8Array): boolean => this.#onRead(buf as Buffer, n) }
    const c = server.conf
    const sock = net.connect((c.path !== '' ? { path: c.path, onread } : { host: c.host, port: c.port, onread, noDelay: true }) as net.NetConnectOpts)
    this.#sock = sock
    sock.on('connect', () => {
      if (this.#sock !== sock) return
      this.#phase = PH_HANDSHAKE
      this.#deadline = now() + dp.conf.timeouts.serverMs
      sock.write(this.#requestHead()) // UTF-8, as core/upstream/connection.ts write()
    })
    sock.on('error', () => { if (this.#sock === sock) this.#serverGone(sock.connecting ? 'LB_ERR_UPSTREAM_CONNECT' : 'LB_ERR_UPSTREAM_RESET') })
    sock.on('close', () => { if (this.#sock === sock) this.#serverGone('LB_ERR_UPSTREAM_RESET') })
  }

  #requestHead (): string {
    return forwardHead(this.#ctx, 'GET', dropRequestHeader, this.#svc.hostFallback, 'connection: Upgrade\r\nupgrade: websocket\r\n')
  }

  /** net onread: returning false pauses the socket. `buf` is READ_BUFFER, valid only during this call. */
  #onRead (buf: Buffer, n: number): boolean {
    if (this.#finished) return false
    switch (this.#phase) {
      case PH_OPEN:
      case PH_CLOSING: {
        this.#deadline = now() + (this.#phase === PH_OPEN ? this.#idleMs : CLOSE_WAIT_MS)
        const ws = this.#ws
        let err: string | null
        if (ws !== null) {
          // one cork for every send this read causes: one syscall (one TLS record) to the client
          this.#readBuf = buf
          this.#readLen = n
          ws.cork(this.#feedCorked)
          this.#readBuf = null
          err = this.#readErr
        } else {
          err = this.#frames!.feed(buf, 0, n) // the client is gone: read the server's close echo
        }
        if (err !== null) this.#protocolError(err)
        return !this.#paused
      }
      case PH_RESPONSE: {
        const err = this.#response!.feed(buf, 0, n)
        if (err !== null) this.#serverFailed('LB_ERR_UPSTREAM_PROTOCOL')
        return !this.#paused
      }
      case PH_HANDSHAKE:
        return this.#onHead(buf, n)
      default:
        return false
    }
  }

  #onHead (buf: Buffer, n: number): boolean {
    let src = buf.subarray(0, n)
    if (this.#head !== null) src = Buffer.concat([this.#head, src])
    const idx = src.indexOf('\r\n\r\n', 0, 'latin1')
    if (idx < 0) {
      if (src.length > MAX_HEAD_BYTES) this.#serverFailed('LB_ERR_UPSTREAM_PROTOCOL')
      else this.#head = Buffer.from(src) // copy: the read buffer is reused
      return true
    }
    this.#head = null
    const lines = src.toString('utf8', 0, idx).split('\r\n') // UTF-8 text, as uWS writes it back (see response-parser.ts)
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)
    if (m === null) {
      this.#serverFailed('LB_ERR_UPSTREAM_PROTOCOL')
      return false
    }
    if (m[1] !== '101') {
      // the server refused the upgrade: its answer goes to the client as an HTTP response
      this.#phase = PH_RESPONSE
      this.#response = new ResponseParser()
      this.#response.reset(this, false)
      const err = this.#response.feed(src, 0, src.length)
      if (err !== null) this.#serverFailed('LB_ERR_UPSTREAM_PROTOCOL')
      return !this.#paused
    }
    const headers: string[] = []
    let accept = ''
    let upgrade = ''
    let protocol = ''
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!
      const colon = line.indexOf(':')
      if (colon <= 0) continue
      const name = line.slice(0, colon)
      const value = line.slice(colon + 1).trim()
      const lower = name.toLowerCase()
      if (lower === 'sec-websocket-accept') accept = value
      else if (lower === 'upgrade') upgrade = value.toLowerCase()
      else if (lower === 'sec-websocket-protocol') protocol = value
      if (!DROP_101.has(lower)) headers.push(name, value)
    }
    if (upgrade !== 'websocket' || accept !== createHash('sha1').update(this.#key + GUID).digest('base64')) {
      this.#serverFailed('LB_ERR_UPSTREAM_PROTOCOL')
      return false
    }
    this.#accept(headers, protocol)
    if (this.#phase !== PH_OPEN) return false
    // frames the server sent right behind its 101, in the same read
    if (idx + 4 < src.length) return this.#onRead(src.subarray(idx + 4) as Buffer, src.length - idx - 4)
    return true
  }

  #accept (headers: string[], protocol: string): void {
    const ctx = this.#ctx
    const dp = this.#dp
    ctx.status = 101
    if (ctx.responseHeaders !== null) headers.push(...ctx.responseHeaders)
    const chain = this.#target.chain
    if (chain.onResponse !== null) {
      // response hooks see the 101 (security headers apply); it has no body, so no transform runs
      const head: ResponseHead = { status: 101, headers, transform: null, noBody: true, contentLength: 0 }
      runResponseHooks(chain, ctx, head, dp.log)
      if (head.transform !== null) head.transform.destroy()
    }
    dp.stripe.addServer(this.#server!.slot, C_RESP_1XX)
    this.#frames = new FrameParser(this)
    this.#phase = PH_OPEN
    this.#deadline = now() + this.#idleMs
    // onOpen runs inside accept
    if (!this.#upgrade.accept(this, this.#key, protocol, headers)) this.#clientAborted()
  }

  // ---- refused upgrade: the server's HTTP answer, relayed

  onHead (status: number, reason: string, headers: string[], contentLength: number): void {
    this.#ctx.status = status
    const slot = this.#server!.slot
    this.#dp.stripe.addServer(slot, C_RESP_1XX + statusClass(status))
    const ctx = this.#ctx
    if (ctx.responseHeaders !== null) headers.push(...ctx.responseHeaders)
    this.#client.head(status, reason, headers, contentLength)
  }

  onBody (buf: Buffer, start: number, end: number): boolean {
    this.#ctx.bytesOut += end - start
    if (this.#client.body(buf, start, end)) return true
    this.#paused = true
    this.#client.onDrain(() => {
      this.#paused = false
      this.#sock?.resume()
    })
    return false
  }

  onEnd (): void {
    this.#client.end()
    this.#sock?.destroy()
    this.#finish()
  }

  // ---- client → server (WsSession, called by http.ts)

  onOpen (ws: ClientWebSocket): void {
    this.#ws = ws
  }

  onMessage (data: ArrayBuffer, isBinary: boolean): void {
    this.#ctx.bytesIn += data.byteLength
    this.#toServer(isBinary ? OP_BINARY : OP_TEXT, new Uint8Array(data))
    const sock = this.#sock
    if (sock !== null && sock.writableLength > this.#maxQueued && this.#phase === PH_OPEN) {
      this.#dp.log.warn(formatError('LB_ERR_WS_BACKPRESSURE', { limit: this.#maxQueued }), { router: this.#ctx.router, server: this.#ctx.server })
      this.#sendClose(1001, SLOW_REASON)
      this.#ws?.end(1013, SLOW_REASON)
    }
  }

  onPing (data: ArrayBuffer): void {
    this.#toServer(OP_PING, new Uint8Array(data))
  }

  onPong (data: ArrayBuffer): void {
    this.#toServer(OP_PONG, new Uint8Array(data))
  }

  onDrain (): void {
    const ws = this.#ws
    if (!this.#paused || ws === null || ws.getBufferedAmount() > HIGH_WATER) return
    this.#paused = false
    this.#sock?.resume()
  }

  onClose (code: number, reason: ArrayBuffer): void {
    this.#ws = null
    if (this.#finished) return
    if (code === 1006 && !this.#serverClosed && !this.#closeSent) {
      // the client vanished without a close frame: so does the server's connection
      this.#sock?.destroy()
      this.#finish()
      return
    }
    // the client's close (or the echo of one we passed on from the server) goes to the server
    this.#sendClose(isWireCloseCode(code) ? code : NO_STATUS, new Uint8Array(reason))
    if (this.#serverClosed) this.#sock?.end()
  }

  #toServer (opcode: number, payload: Uint8Array): void {
    const sock = this.#sock
    if (sock === null || this.#phase !== PH_OPEN || this.#closeSent) return
    this.#deadline = now() + this.#idleMs
    if (this.#corked === null) {
      // client messages of one uWS read arrive as successive callbacks: their frames
      // go out together in one writev at the end of the turn, not one syscall each
      sock.cork()
      this.#corked = sock
      atTurnEnd(this)
    }
    sock.write(encodeFrame(opcode, payload))
  }

  turnEnd (): void {
    const sock = this.#corked
    this.#corked = null
    sock?.uncork() // a no-op on a socket that end() already uncorked
  }

  #sendClose (code: number, reason: Uint8Array): void {
    const sock = this.#sock
    if (sock === null || this.#closeSent) return
    this.#closeSent = true
    sock.write(encodeFrame(OP_CLOSE, closePayload(code, reason)))
    this.#phase = PH_CLOSING
    this.#deadline = now() + CLOSE_WAIT_MS
  }

  // ---- server → client (FrameSink)

  onData (buf: Buffer, start: number, end: number, binary: boolean, first: boolean, last: boolean): void {
    const ws = this.#ws
    if (ws === null) return
    this.#ctx.bytesOut += end - start
    const view = buf.subarray(start, end)
    let ok: boolean
    if (first && last) ok = ws.send(view, binary) === 1
    else if (first) ok = ws.sendFirstFragment(view, binary)
    else if (last) ok = ws.sendLastFragment(view)
    else ok = ws.sendFragment(view)
    if (!ok && ws.getBufferedAmount() > HIGH_WATER) this.#paused = true
  }

  onPingFrame (payload: Buffer): void {
    this.#ws?.ping(payload)
  }

  onPongFrame (): void {
    // the answer to a client's ping we passed on: uWS already answered that ping, and cannot send a pong
  }

  onCloseFrame (code: number, reason: Buffer): void {
    this.#serverClosed = true
    const ws = this.#ws
    if (ws !== null) {
      // passes the server's code on; our close handler (onClose above) then echoes it to the server
      if (code === NO_STATUS) ws.end()
      else ws.end(code, reason)
    } else {
      this.#sock?.end()
    }
  }

  // ---- endings

  /** The server's connection failed or closed. */
  #serverGone (code: ErrorCode): void {
    if (this.#finished) return
    switch (this.#phase) {
      case PH_CONNECT:
      case PH_HANDSHAKE:
        this.#serverFailed(this.#phase === PH_CONNECT ? 'LB_ERR_UPSTREAM_CONNECT' : code)
        return
      case PH_RESPONSE:
        if (this.#response!.close()) return // a close-delimited body ended: onEnd ran
        this.#client.destroy()
        this.#finish()
        return
      default: {
        // without a close frame from the server, the client's connection ends abruptly too (it sees 1006)
        const ws = this.#ws
        this.#ws = null
        if (ws !== null && !this.#serverClosed) ws.close()
        this.#finish()
      }
    }
  }

  /** The handshake with the server failed: another server if the attempt can be replayed, else an error answer. */
  #serverFailed (code: ErrorCode): void {
    const server = this.#server!
    const dp = this.#dp
    const connectPhase = this.#phase === PH_CONNECT
    const sock = this.#sock
    this.#sock = null
    sock?.destroy()
    dp.failServer(this.#svc, server, connectPhase)
    this.#release()
    if (this.#phase === PH_RESPONSE && this.#client.started) {
      this.#client.destroy()
      this.#finish()
      return
    }
    if (connectPhase && this.#attempts <= this.#svc.conf.retries) {
      // nothing reached the server: the upgrade request can go to another one
      dp.stripe.addServer(server.slot, C_RETRIES)
      this.#connect(this.#serverIdx, code)
      return
    }
    this.#fail(code, {})
  }

  #protocolError (reason: string): void {
    this.#dp.log.warn('WebSocket server broke the protocol', { server: this.#ctx.server, reason })
    this.#sendClose(1002, EMPTY)
    const ws = this.#ws
    this.#ws = null
    ws?.end(1002, EMPTY)
    this.#sock?.destroy()
    this.#finish()
  }

  /** Called by the sweeper once the deadline of the current phase passed. */
  expire (): void {
    switch (this.#phase) {
      case PH_CONNECT:
      case PH_HANDSHAKE:
        this.#serverFailed('LB_ERR_UPSTREAM_TIMEOUT')
        return
      case PH_OPEN:
        // idle: nothing either way for timeouts.tunnel
        this.#sendClose(1001, IDLE_REASON)
        this.#ws?.end(1001, IDLE_REASON)
        return
      default:
        this.#sock?.destroy()
        this.#finish()
    }
  }

  get deadline (): number { return this.#deadline }

  #clientAborted (): void {
    if (this.#finished) return
    if (this.#ctx.status === 0) this.#ctx.status = 499
    this.#sock?.destroy()
    this.#finish()
  }

  /** Answers the upgrade request with an error (DataPlane.error: counted first). */
  #fail (code: ErrorCode, params: Record<string, string | number>): void {
    if (this.#end()) this.#dp.error(this.#ctx, this.#client, code, params)
  }

  /** Gives the server slot back (in-flight count) and adds the bytes to its counters. */
  #release (): void {
    const server = this.#server
    if (server === null) return
    this.#server = null
    this.#dp.releaseServer(server.slot, this.#ctx.bytesIn, this.#ctx.bytesOut)
  }

  /** Logged and counted once, at the end of the session (nginx logs a WebSocket when it closes, with 101). */
  #finish (): void {
    if (this.#end()) this.#dp.finish(this.#ctx)
  }

  /** Ends the session's own part, once (false when it had ended); the caller counts the request. */
  #end (): boolean {
    if (this.#finished) return false
    this.#finished = true
    tunnels.delete(this)
    const sock = this.#sock
    if (sock !== null && this.#phase !== PH_CLOSING) sock.destroy()
    this.#release()
    return true
  }
}

function sweep (): void {
  const t = now()
  for (const tunnel of tunnels) if (((t - tunnel.deadline) | 0) > 0) tunnel.expire()
}
