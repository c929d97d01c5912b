// WebSockets on the node engine (engine.ts): the client's side of a
// proxied WebSocket over the `ws` library, so ws-proxy.ts and ws-relay.ts run
// unchanged on it (the same handshake with the server, the same relay of
// messages, pings and close codes, the same idle time-out). `ws` reads the
// client's frames (masking, fragmentation, UTF-8 of text, close codes,
// websocket_max_message) and writes ours; permessage-deflate is never
// negotiated, as on uWS.
//
// Differences from uWS, which only a client sees: a client message over
// websocket_max_message is answered with close 1009 (uWS cuts the
// connection), an unmasked frame or a bad close code with 1002 and a text
// message that is not UTF-8 with 1007 (what RFC 6455 asks; uWS: README
// "Request forms at the edge").
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { type WebSocket, WebSocketServer } from 'ws'
import type { ClientWebSocket, WsSession } from '../../ws/ws-client.js'

/** The 101's extra headers and chosen subprotocol while one handshake is completed (handleUpgrade runs synchronously). */
let pendingHeaders: readonly string[] = []
let pendingProtocol = ''

const servers = new Map<number, WebSocketServer>()

/** The `ws` server (no listener of its own) for one largest client message. */
function serverFor (maxMessage: number): WebSocketServer {
  let wss = servers.get(maxMessage)
  if (wss === undefined) {
    wss = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      clientTracking: false,
      maxPayload: maxMessage,
      // the protocol the server chose (its 101), if the client offered it; none otherwise
      handleProtocols: (offered) => pendingProtocol !== '' && offered.has(pendingProtocol) ? pendingProtocol : false,
    })
    wss.on('headers', (lines: string[]) => {
      const h = pendingHeaders
      for (let i = 0; i < h.length; i += 2) lines.push(`${h[i]!}: ${h[i + 1]!}`)
    })
    servers.set(maxMessage, wss)
  }
  return wss
}

/**
 * Completes the client's upgrade (101 with `headers` and `protocol`) on its
 * socket, `head` being the bytes read after the request head; the session's
 * onOpen runs before this returns. False when the socket was gone.
 */
export function acceptWebSocket (req: IncomingMessage, socket: Duplex, head: Buffer, maxMessage: number,
  session: WsSession, protocol: string, headers: readonly string[]): boolean {
  let opened = false
  pendingHeaders = headers
  pendingProtocol = protocol
  try {
    serverFor(maxMessage).handleUpgrade(req, socket, head, (ws) => {
      opened = true
      ws.binaryType = 'arraybuffer'
      const client = new NodeWebSocket(ws, socket, session)
      session.onOpen(client)
    })
  } finally {
    pendingHeaders = []
    pendingProtocol = ''
  }
  if (opened && socket.isPaused()) socket.resume() // paused by the engine while the server was asked
  return opened
}

/** Bytes of a Buffer as an ArrayBuffer of their own (what WsSession takes). */
function arrayBuffer (b: Buffer | ArrayBuffer): ArrayBuffer {
  if (b instanceof ArrayBuffer) return b
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer
}

const EMPTY_AB = new ArrayBuffer(0)

/** ClientWebSocket over a `ws` WebSocket; its events go to the session as uWS's would. */
class NodeWebSocket implements ClientWebSocket {
  readonly #ws: WebSocket
  readonly #socket: Duplex
  readonly #session: WsSession
  /** the session was told of the close (uWS tells it at once when lb ends or closes; `ws` after the handshake) */
  #closed = false

  constructor (ws: WebSocket, socket: Duplex, session: WsSession) {
    this.#ws = ws
    this.#socket = socket
    this.#session = session
    ws.on('message', (data: Buffer | ArrayBuffer, isBinary: boolean) => { if (!this.#closed) session.onMessage(arrayBuffer(data), isBinary) })
    ws.on('ping', (data: Buffer) => { if (!this.#closed) session.onPing(arrayBuffer(data)) })
    ws.on('pong', (data: Buffer) => { if (!this.#closed) session.onPong(arrayBuffer(data)) })
    ws.on('close', (code: number, reason: Buffer) => this.#close(code, arrayBuffer(reason)))
    ws.on('error', () => { /* `ws` closes with the right code itself (1002, 1007, 1009); 'close' follows */ })
    socket.on('drain', () => { if (!this.#closed) session.onDrain() })
  }

  #close (code: number, reason: ArrayBuffer): void {
    if (this.#closed) return
    this.#closed = true
    this.#session.onClose(code, reason)
  }

  /** 1 = written, 0 = queued behind earlier bytes (wait for onDrain). Copies: `data` may be a reused read buffer. */
  send (data: Uint8Array, isBinary: boolean): number {
    this.#ws.send(Buffer.from(data), { binary: isBinary, fin: true })
    return this.#ws.bufferedAmount === 0 ? 1 : 0
  }

  // `ws` sends continuation frames after a send with fin: false, until one with fin: true
  sendFirstFragment (data: Uint8Array, isBinary: boolean): boolean {
    this.#ws.send(Buffer.from(data), { binary: isBinary, fin: false })
    return this.#ws.bufferedAmount === 0
  }

  sendFragment (data: Uint8Array): boolean {
    this.#ws.send(Buffer.from(data), { fin: false })
    return this.#ws.bufferedAmount === 0
  }

  sendLastFragment (data: Uint8Array): boolean {
    this.#ws.send(Buffer.from(data), { fin: true })
    return this.#ws.bufferedAmount === 0
  }

  ping (data: Uint8Array): number {
    this.#ws.ping(Buffer.from(data))
    return 1
  }

  getBufferedAmount (): number {
    return this.#ws.bufferedAmount
  }

  end (code?: number, reason?: Uint8Array): void {
    try {
      if (code === undefined) this.#ws.close()
      else this.#ws.close(code, reason === undefined ? undefined : Buffer.from(reason))
    } catch {
      this.#ws.terminate() // a code `ws` will not put on the wire
    }
    this.#close(code ?? 1005, reason === undefined ? EMPTY_AB : arrayBuffer(Buffer.from(reason)))
  }

  close (): void {
    this.#ws.terminate()
    this.#close(1006, EMPTY_AB)
  }

  cork (cb: () => void): unknown {
    const s = this.#socket as Duplex & { cork: () => void, uncork: () => void }
    s.cork()
    try {
      cb()
    } finally {
      s.uncork()
    }
    return this
  }
}
