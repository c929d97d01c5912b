// The client side of one request as the data plane sees it. core/worker/transport/uws/
// implements it over uWS, core/worker/transport/node/client.ts over node:http (the node
// engine); nothing else touches either's objects.
import type { WebSocketUpgrade } from '../ws/ws-client.js'

export interface ClientResponse {
  /** the client went away; nothing may be written any more */
  readonly aborted: boolean
  /** a response was started (head written or queued) */
  readonly started: boolean
  /** set when the request asks for a WebSocket (core/worker/ws/ws-proxy.ts); null for every other request */
  readonly websocket: WebSocketUpgrade | null
  /** Called once when the client goes away before the response ended. */
  onAbort (cb: () => void): void
  /**
   * Body chunks of the request. Chunks are views valid only during the call
   * (copy to keep). Chunks that arrived before this call are delivered first.
   */
  onBody (cb: (chunk: Buffer, last: boolean) => void): void
  /**
   * Trailer fields of a chunked request body, flat [name, value, ...] with
   * lower-case names, set before the last body chunk is delivered; null when
   * there are none (always on uWS, which refuses a body with trailers).
   */
  readonly trailers: readonly string[] | null
  /** Stop / restart reading the request body (upstream backpressure). */
  pauseBody (): void
  resumeBody (): void
  /** Starts the response; `contentLength` -1 = unknown (chunked to the client). */
  head (status: number, reason: string, headers: readonly string[], contentLength: number): void
  /** Writes body bytes buf[start, end); false = client backpressure (the data is kept), wait for onDrain. */
  body (buf: Buffer, start: number, end: number): boolean
  onDrain (cb: () => void): void
  /** Trailer fields to send before end() (gRPC's grpc-status); absent where the transport has none (uWS: HTTP/1.1 sends none). */
  sendTrailers?: (headers: readonly string[]) => void
  /** Ends the response (after head and body). */
  end (): void
  /** A complete small response in one write; `close` asks to close the connection after it. */
  send (status: number, headers: readonly string[], body: string, close?: boolean): void
  /**
   * The body bytes send(…, body) puts on the wire (0 for HEAD, or when the client
   * is gone), so that a caller can count an answer before sending it.
   */
  bodyBytes (body: string): number
  /** Closes the client connection at once (a response that cannot be completed). */
  destroy (): void
}
