// What the generation API's reply writers (ollama/reply.ts, openai/reply.ts,
// http/respond.ts) and a remote relay (remote/run.ts) use of a response: the
// small part of node:http's ServerResponse they call. node:http's response
// satisfies it (the generation service's socket and TCP listener); the data
// plane's worker implements it over its client (edge/edge-response.ts), so
// the same writers put a remote reply in the caller's shape in either place.

/** A response the generation writers write to; it emits 'drain' (after a write returned false) and 'close' (the client went away). */
export interface GenResponse extends NodeJS.EventEmitter {
  readonly headersSent: boolean
  readonly writableEnded: boolean
  readonly destroyed: boolean
  /** A write returned false and 'drain' has not followed yet. */
  readonly writableNeedDrain: boolean
  writeHead (status: number, headers: Record<string, string | number>): unknown
  /** false: buffered beyond the high-water mark, wait for 'drain'. */
  write (chunk: string): boolean
  end (chunk?: string): unknown
  /** Closes the connection at once (a reply that cannot be completed). */
  destroy (): unknown
}
