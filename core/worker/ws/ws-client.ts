// The client side of a WebSocket as the data plane sees it (as client.ts is
// for HTTP): core/worker/transport/uws/ implements these over uWS, nothing else
// touches uWS objects. core/worker/ws/ws-relay.ts (under ws-proxy.ts) is the one user.

/**
 * An accepted client WebSocket, valid from the session's onOpen until its
 * onClose (uWS throws on any use after close). Sends made outside a uWS
 * callback belong inside cork(), one syscall / TLS record for all of them.
 */
export interface ClientWebSocket {
  /** 1 = sent, 0 = queued in uWS (backpressure: wait for onDrain); never dropped (maxBackpressure 0) */
  send (data: Uint8Array, isBinary: boolean): number
  /** a message in pieces (a server's message streamed through): false = backpressure built up */
  sendFirstFragment (data: Uint8Array, isBinary: boolean): boolean
  sendFragment (data: Uint8Array): boolean
  sendLastFragment (data: Uint8Array): boolean
  ping (data: Uint8Array): number
  /** bytes queued in uWS for this client */
  getBufferedAmount (): number
  /** Closes with a close frame (no code: an empty one, the client sees 1005); onClose runs at once. */
  end (code?: number, reason?: Uint8Array): void
  /** Closes at once without a close frame (the client sees 1006); onClose runs at once. */
  close (): void
  cork (cb: () => void): unknown
}

/** One client WebSocket's events, delivered by the engine (transport/uws/app.ts, node/ws.ts). Buffers are valid only during the call. */
export interface WsSession {
  onOpen (ws: ClientWebSocket): void
  onMessage (data: ArrayBuffer, isBinary: boolean): void
  /** uWS wrote out some of what was queued for the client */
  onDrain (): void
  /** code: as received (1005 = close frame without one, 1006 = no close frame), or 0 when we closed it */
  onClose (code: number, reason: ArrayBuffer): void
  /** the client pinged; uWS has already answered with a pong (it cannot be told not to) */
  onPing (data: ArrayBuffer): void
  onPong (data: ArrayBuffer): void
}

/** A request asking for a WebSocket (ClientResponse.websocket): accepted once its server accepted. */
export interface WebSocketUpgrade {
  /**
   * Answers 101 with `headers` (flat [name, value, ...]) and `protocol` (''
   * for none) for the client's `key`; the session's onOpen runs before this
   * returns. False when the client went away first.
   */
  accept (session: WsSession, key: string, protocol: string, headers: readonly string[]): boolean
}
