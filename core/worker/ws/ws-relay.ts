// The open phase of a proxied WebSocket (ws-proxy.ts runs the handshake and
// the endings): messages relay both ways between the client's uWS WebSocket
// and the server's socket.
// - server → client: frames are parsed from the socket's reads and streamed to
//   uWS as messages or fragments (FrameSink), never reassembled. While uWS
//   holds more than HIGH_WATER bytes for the client, the server's socket is
//   paused (resumed on drain).
// - client → server: uWS hands over whole messages (up to the entry point's
//   websocket_max_message) and cannot pause a WebSocket, so each message is
//   masked into one frame and written; bytes waiting for a slow server are
//   capped at twice that limit (LB_ERR_WS_BACKPRESSURE). Small frames of one
//   turn are staged side by side (frame-staging.ts) and leave in one write.
// Close codes and reasons pass through both ways. Pings pass through both
// ways; a client's ping is also answered by uWS itself, and the server's pong
// to it is dropped (uWS has no way to send a pong).
import type net from 'node:net'
import { now } from '../../clock.js'
import { formatError } from '../../errors.js'
import { type AtTurnEnd, atTurnEnd } from '../../net/turn.js'
import type { Ctx } from '../request/context.js'
import type { ExchangeHost, ServiceRuntime } from '../runtime.js'
import { ServerTries } from '../proxy/server-tries.js'
import type { ClientWebSocket, WsSession } from './ws-client.js'
import { type FrameSink, NO_STATUS, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT, closePayload, encodeFrame, isWireCloseCode } from './ws-frame.js'
import { STAGED_MAX, type Staged, stageFrame, stagedWritten } from './frame-staging.js'

/** bytes uWS may hold for a client before the server's socket is paused */
export const HIGH_WATER = 64 * 1024
/** after a close frame is sent to the server, how long it has to close its side */
export const CLOSE_WAIT_MS = 5_000
const SLOW_REASON = Buffer.from('server too slow')

export const PH_CONNECT = 0 // connecting to the server
export const PH_HANDSHAKE = 1 // upgrade request sent, waiting for the head of the answer
export const PH_RESPONSE = 2 // the server refused the upgrade: relaying its HTTP response
export const PH_OPEN = 3 // relaying messages
export const PH_CLOSING = 4 // a close frame went to the server: waiting for it to close

export abstract class WsRelay extends ServerTries implements WsSession, FrameSink, AtTurnEnd {
  protected readonly dp: ExchangeHost
  protected readonly ctx: Ctx
  /** timeouts.tunnel: no byte either way for this long closes both sides with 1001 */
  protected readonly idleMs: number
  readonly #maxQueued: number
  protected sock: net.Socket | null = null
  /** the server socket while corked until the end of this turn (#toServer) */
  #corked: net.Socket | null = null
  /** this turn's small frames for the server, written at the turn's end or before any other write */
  readonly #staged: Staged = { buf: null, start: 0, end: 0 }
  /** frames are staged this turn: the server's socket had taken every byte before it (frame-staging.ts) */
  #stage = false
  readonly #writeStaged = (): void => {
    const s = this.#staged
    const sock = this.sock
    if (s.buf !== null && sock !== null && !sock.destroyed && !sock.writableEnded) sock.write(s.buf.subarray(s.start, s.end))
    s.buf = null
  }

  protected phase = PH_CONNECT
  /** tick when the current phase times out */
  protected phaseEnd = 0
  protected ws: ClientWebSocket | null = null
  /** the server's socket is paused until the client drains */
  protected paused = false
  /** the server sent a close frame (so ours, if any, is the echo) */
  protected serverClosed = false
  protected closeSent = false
  protected finished = false

  constructor (dp: ExchangeHost, ctx: Ctx, svc: ServiceRuntime | null) {
    super(dp, svc)
    this.dp = dp
    this.ctx = ctx
    this.idleMs = dp.conf.timeouts.tunnelMs
    this.#maxQueued = 2 * dp.conf.entrypoints[ctx.epSlot]!.wsMaxMessage
  }

  /** Logged and counted once, at the end of the session (ws-proxy.ts). */
  protected abstract finish (): void

  // ---- client → server (WsSession, called by the engine)

  onOpen (ws: ClientWebSocket): void {
    this.ws = ws
  }

  onMessage (data: ArrayBuffer, isBinary: boolean): void {
    this.ctx.bytesIn += data.byteLength
    this.#toServer(isBinary ? OP_BINARY : OP_TEXT, new Uint8Array(data))
    const sock = this.sock
    if (sock !== null && sock.writableLength > this.#maxQueued && this.phase === PH_OPEN) {
      this.dp.log.warn(formatError('LB_ERR_WS_BACKPRESSURE', { limit: this.#maxQueued }), { router: this.ctx.router, server: this.ctx.server })
      this.sendClose(1001, SLOW_REASON)
      this.ws?.end(1013, SLOW_REASON)
    }
  }

  onPing (data: ArrayBuffer): void {
    this.#toServer(OP_PING, new Uint8Array(data))
  }

  onPong (data: ArrayBuffer): void {
    this.#toServer(OP_PONG, new Uint8Array(data))
  }

  onDrain (): void {
    const ws = this.ws
    if (!this.paused || ws === null || ws.getBufferedAmount() > HIGH_WATER) return
    this.paused = false
    this.sock?.resume()
  }

  onClose (code: number, reason: ArrayBuffer): void {
    this.ws = null
    if (this.finished) return
    if (code === 1006 && !this.serverClosed && !this.closeSent) {
      // the client vanished without a close frame: so does the server's connection
      this.sock?.destroy()
      this.finish()
      return
    }
    // the client's close (or the echo of one we passed on from the server) goes to the server
    this.sendClose(isWireCloseCode(code) ? code : NO_STATUS, new Uint8Array(reason))
    if (this.serverClosed) this.sock?.end()
  }

  #toServer (opcode: number, payload: Uint8Array): void {
    const sock = this.sock
    if (sock === null || this.phase !== PH_OPEN || this.closeSent) return
    this.phaseEnd = now() + this.idleMs
    if (this.#corked === null) {
      // client messages of one uWS read arrive as successive callbacks: their frames
      // go out together in one writev at the end of the turn, not one syscall each
      sock.cork()
      this.#corked = sock
      atTurnEnd(this)
      // bytes still waiting from an earlier turn: a server that does not read would keep a staging buffer per turn
      // (64 KiB for a 6-byte frame); its frames get buffers of their own size until it has taken them
      this.#stage = sock.writableLength === 0
    }
    if (this.#stage && payload.length <= STAGED_MAX) stageFrame(this.#staged, opcode, payload, this.#writeStaged)
    else {
      this.#writeStaged() // in order
      sock.write(encodeFrame(opcode, payload))
    }
  }

  turnEnd (): void {
    const sock = this.#corked
    this.#corked = null
    if (sock === null) return
    this.#writeStaged()
    sock.uncork() // a no-op on a socket that end() already uncorked
    stagedWritten(sock.writableLength)
  }

  protected sendClose (code: number, reason: Uint8Array): void {
    const sock = this.sock
    if (sock === null || this.closeSent) return
    this.closeSent = true
    this.#writeStaged() // the frames before it go first
    sock.write(encodeFrame(OP_CLOSE, closePayload(code, reason)))
    this.phase = PH_CLOSING
    this.phaseEnd = now() + CLOSE_WAIT_MS
  }

  // ---- server → client (FrameSink)

  onData (buf: Buffer, start: number, end: number, binary: boolean, first: boolean, last: boolean): void {
    const ws = this.ws
    if (ws === null) return
    this.ctx.bytesOut += end - start
    const view = buf.subarray(start, end)
    let ok: boolean
    if (first && last) ok = ws.send(view, binary) === 1
    else if (first) ok = ws.sendFirstFragment(view, binary)
    else if (last) ok = ws.sendLastFragment(view)
    else ok = ws.sendFragment(view)
    if (!ok && ws.getBufferedAmount() > HIGH_WATER) this.paused = true
  }

  onPingFrame (payload: Buffer): void {
    this.ws?.ping(payload)
  }

  onPongFrame (): void {
    // the answer to a client's ping we passed on: uWS already answered that ping, and cannot send a pong
  }

  onCloseFrame (code: number, reason: Buffer): void {
    this.serverClosed = true
    const ws = this.ws
    if (ws !== null) {
      // passes the server's code on; our close handler (onClose above) then echoes it to the server
      if (code === NO_STATUS) ws.end()
      else ws.end(code, reason)
    } else {
      this.sock?.end()
    }
  }
}
