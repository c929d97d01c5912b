// One proxied WebSocket. DataPlane.handle routed the upgrade request like any
// other (routers, middlewares); here a server is picked with the service's
// balancer (in-flight counts in shm, passive failures, retries on connect
// failure), the upgrade request goes to it over a fresh node:net connection,
// and only once it answers 101 is the client's upgrade accepted. Any other
// answer is relayed to the client as an ordinary HTTP response.
//
// Then messages relay both ways (ws-relay.ts) until a close or the idle
// time-out (timeouts.tunnel: no byte either way) closes both sides with 1001.
//
// A tunnel belongs to its two sockets, not to a config generation: a reload
// swaps the DataPlane and leaves established tunnels alone.
import { now } from '../../clock.js'
import type { ErrorCode } from '../../errors.js'
import { C_RESP_1XX, statusClass } from '../../shm/layout.js'
import type { ResponseHead } from '../../plugin.js'
import { ResponseParser, type ResponseSink, MAX_HEAD_BYTES } from '../../upstream/response-parser.js'
import { runResponseHooks } from '../request/chain.js'
import type { ClientResponse } from '../transport/client.js'
import type { Ctx } from '../request/context.js'
import type { ExchangeHost, RouteTarget, ServiceRuntime } from '../runtime.js'
import { connectServer } from '../proxy/server-tries.js'
import { readUpgradeAnswer, upgradeRequestHead, validHandshake } from './ws-handshake.js'
import type { WebSocketUpgrade } from './ws-client.js'
import { FrameParser } from './ws-frame.js'
import { CLOSE_WAIT_MS, PH_CLOSING, PH_CONNECT, PH_HANDSHAKE, PH_OPEN, PH_RESPONSE, WsRelay } from './ws-relay.js'

const SWEEP_MS = 250
const EMPTY = new Uint8Array(0)
const IDLE_REASON = Buffer.from('idle timeout')

/** every read from every server of this thread lands here (net onread): parsed and handed on before the next read */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024)

const tunnels = new Set<WsTunnel>()
let sweeper: NodeJS.Timeout | null = null

export class WsTunnel extends WsRelay implements ResponseSink {
  readonly #client: ClientResponse
  readonly #upgrade: WebSocketUpgrade
  readonly #target: RouteTarget
  readonly #svc: ServiceRuntime
  readonly #key: string
  /** head bytes of the server's answer split across reads */
  #head: Buffer | null = null
  #frames: FrameParser | null = null
  #response: ResponseParser | null = null
  // the read being fed inside ws.cork (a bound function, not a closure per read)
  #readBuf: Buffer | null = null
  #readLen = 0
  #readErr: string | null = null
  readonly #feedCorked = (): void => { this.#readErr = this.#frames!.feed(this.#readBuf!, 0, this.#readLen) }

  /** `client` is a WebSocket upgrade (client.websocket set). */
  constructor (dp: ExchangeHost, ctx: Ctx, client: ClientResponse, target: RouteTarget) {
    super(dp, ctx, target.service)
    this.#client = client
    this.#upgrade = client.websocket!
    this.#target = target
    this.#svc = target.service!
    this.#key = ctx.header('sec-websocket-key')
  }

  start (): void {
    const ctx = this.ctx
    if (!validHandshake(ctx, this.#key)) {
      this.#fail('LB_ERR_BAD_REQUEST', { reason: 'invalid WebSocket handshake (Sec-WebSocket-Key, Sec-WebSocket-Version: 13)' })
      return
    }
    this.#client.onAbort(() => this.#clientAborted())
    tunnels.add(this)
    if (sweeper === null) {
      sweeper = setInterval(sweep, SWEEP_MS)
      sweeper.unref()
    }
    this.#connect(false, null)
  }

  // ---- handshake

  /** `failed`: the error of the attempt being retried, reported if no other server is left. */
  #connect (retry: boolean, failed: ErrorCode | null): void {
    const dp = this.dp
    const server = this.claimFor(this.ctx, retry)
    if (server === null) {
      if (failed !== null) this.#fail(failed, {})
      else this.#fail('LB_ERR_NO_SERVER', this.noServerParams())
      return
    }
    this.ctx.server = server.conf.name
    this.phase = PH_CONNECT
    this.phaseEnd = now() + dp.conf.timeouts.connectMs // the sweeper ends a connect that takes longer
    const onread = { buffer: READ_BUFFER, callback: (n: number, buf: Uint8Array): boolean => this.#onRead(buf as Buffer, n) }
    const sock = connectServer(server.conf, { onread })
    this.sock = sock
    sock.on('connect', () => {
      if (this.sock !== sock) return
      this.phase = PH_HANDSHAKE
      this.phaseEnd = now() + dp.conf.timeouts.serverMs
      sock.write(upgradeRequestHead(this.ctx, this.#svc.hostFallback)) // UTF-8, as core/upstream/connection.ts write()
    })
    sock.on('error', () => { if (this.sock === sock) this.#serverGone(sock.connecting ? 'LB_ERR_UPSTREAM_CONNECT' : 'LB_ERR_UPSTREAM_RESET') })
    sock.on('close', () => { if (this.sock === sock) this.#serverGone('LB_ERR_UPSTREAM_RESET') })
  }

  /** net onread: returning false pauses the socket. `buf` is READ_BUFFER, valid only during this call. */
  #onRead (buf: Buffer, n: number): boolean {
    if (this.finished) return false
    switch (this.phase) {
      case PH_OPEN:
      case PH_CLOSING: {
        this.phaseEnd = now() + (this.phase === PH_OPEN ? this.idleMs : CLOSE_WAIT_MS)
        const ws = this.ws
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
        return !this.paused
      }
      case PH_RESPONSE: {
        const err = this.#response!.feed(buf, 0, n)
        if (err !== null) this.#serverFailed('LB_ERR_UPSTREAM_PROTOCOL')
        return !this.paused
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
    const answer = readUpgradeAnswer(src.toString('utf8', 0, idx), this.#key)
    if (answer === null) {
      this.#serverFailed('LB_ERR_UPSTREAM_PROTOCOL')
      return false
    }
    if (answer.status !== 101) {
      // the server refused the upgrade: its answer goes to the client as an HTTP response
      this.phase = PH_RESPONSE
      this.#response = new ResponseParser()
      this.#response.reset(this, false)
      const err = this.#response.feed(src, 0, src.length)
      if (err !== null) this.#serverFailed('LB_ERR_UPSTREAM_PROTOCOL')
      return !this.paused
    }
    this.#accept(answer.headers, answer.protocol)
    if (this.phase !== PH_OPEN) return false
    // frames the server sent right behind its 101, in the same read
    if (idx + 4 < src.length) return this.#onRead(src.subarray(idx + 4) as Buffer, src.length - idx - 4)
    return true
  }

  #accept (headers: string[], protocol: string): void {
    const ctx = this.ctx
    const dp = this.dp
    ctx.status = 101
    if (ctx.responseHeaders !== null) headers.push(...ctx.responseHeaders)
    const chain = this.#target.chain
    if (chain.onResponse !== null) {
      // response hooks see the 101 (security headers apply); it has no body, so no transform runs
      const head: ResponseHead = { status: 101, headers, transform: null, noBody: true, contentLength: 0 }
      runResponseHooks(chain, ctx, head, dp.log)
      if (head.transform !== null) head.transform.destroy()
    }
    dp.stripe.addServer(this.server!.slot, C_RESP_1XX)
    this.#frames = new FrameParser(this)
    this.phase = PH_OPEN
    this.phaseEnd = now() + this.idleMs
    // onOpen runs inside accept
    if (!this.#upgrade.accept(this, this.#key, protocol, headers)) this.#clientAborted()
  }

  // ---- refused upgrade: the server's HTTP answer, relayed

  onHead (status: number, reason: string, headers: string[], contentLength: number): void {
    this.ctx.status = status
    const slot = this.server!.slot
    this.dp.stripe.addServer(slot, C_RESP_1XX + statusClass(status))
    const ctx = this.ctx
    if (ctx.responseHeaders !== null) headers.push(...ctx.responseHeaders)
    this.#client.head(status, reason, headers, contentLength)
  }

  onBody (buf: Buffer, start: number, end: number): boolean {
    this.ctx.bytesOut += end - start
    if (this.#client.body(buf, start, end)) return true
    this.paused = true
    this.#client.onDrain(() => {
      this.paused = false
      this.sock?.resume()
    })
    return false
  }

  onEnd (): void {
    this.#client.end()
    this.sock?.destroy()
    this.finish()
  }

  // ---- endings

  /** The server's connection failed or closed. */
  #serverGone (code: ErrorCode): void {
    if (this.finished) return
    switch (this.phase) {
      case PH_CONNECT:
      case PH_HANDSHAKE:
        this.#serverFailed(this.phase === PH_CONNECT ? 'LB_ERR_UPSTREAM_CONNECT' : code)
        return
      case PH_RESPONSE:
        if (this.#response!.close()) return // a close-delimited body ended: onEnd ran
        this.#client.destroy()
        this.finish()
        return
      default: {
        // without a close frame from the server, the client's connection ends abruptly too (it sees 1006)
        const ws = this.ws
        this.ws = null
        if (ws !== null && !this.serverClosed) ws.close()
        this.finish()
      }
    }
  }

  /** The handshake with the server failed: another server if the attempt can be replayed, else an error answer. */
  #serverFailed (code: ErrorCode): void {
    const connectPhase = this.phase === PH_CONNECT
    const sock = this.sock
    this.sock = null
    sock?.destroy()
    this.tryFailed(connectPhase)
    this.#release()
    if (this.phase === PH_RESPONSE && this.#client.started) {
      this.#client.destroy()
      this.finish()
      return
    }
    if (connectPhase && this.mayRetry(this.ctx.retryLimit)) {
      // nothing reached the server: the upgrade request can go to another one (at once: the retry
      // middleware's interval applies to HTTP requests, a handshake's connect timer runs meanwhile)
      this.#connect(true, code)
      return
    }
    this.#fail(code, {})
  }

  #protocolError (reason: string): void {
    this.dp.log.warn('WebSocket server broke the protocol', { server: this.ctx.server, reason })
    this.sendClose(1002, EMPTY)
    const ws = this.ws
    this.ws = null
    ws?.end(1002, EMPTY)
    this.sock?.destroy()
    this.finish()
  }

  /** Called by the sweeper once the deadline of the current phase passed. */
  expire (): void {
    switch (this.phase) {
      case PH_CONNECT:
      case PH_HANDSHAKE:
        this.#serverFailed('LB_ERR_UPSTREAM_TIMEOUT')
        return
      case PH_OPEN:
        // idle: nothing either way for timeouts.tunnel
        this.sendClose(1001, IDLE_REASON)
        this.ws?.end(1001, IDLE_REASON)
        return
      default:
        this.sock?.destroy()
        this.finish()
    }
  }

  get deadline (): number { return this.phaseEnd }

  #clientAborted (): void {
    if (this.finished) return
    if (this.ctx.status === 0) this.ctx.status = 499
    this.sock?.destroy()
    this.finish()
  }

  /** Answers the upgrade request with an error (DataPlane.error: counted first). */
  #fail (code: ErrorCode, params: Record<string, string | number>): void {
    if (this.#end()) this.dp.error(this.ctx, this.#client, code, params)
  }

  /** Gives the server slot back (in-flight count) and adds the bytes to its counters. */
  #release (): void {
    this.releaseTry(this.ctx.bytesIn, this.ctx.bytesOut)
  }

  /** Logged and counted once, at the end of the session (nginx logs a WebSocket when it closes, with 101). */
  protected finish (): void {
    if (this.#end()) this.dp.finish(this.ctx)
  }

  /** Ends the session's own part, once (false when it had ended); the caller counts the request. */
  #end (): boolean {
    if (this.finished) return false
    this.finished = true
    tunnels.delete(this)
    const sock = this.sock
    if (sock !== null && this.phase !== PH_CLOSING) sock.destroy()
    this.#release()
    return true
  }
}

function sweep (): void {
  const t = now()
  for (const tunnel of tunnels) if (((t - tunnel.deadline) | 0) > 0) tunnel.expire()
}
