// The client side of one request on the node engine (engine.ts): the
// data plane's ClientResponse over node:http's IncomingMessage and
// ServerResponse. Node's own machinery does what uWS refuses: responses to
// pipelined requests go out in request order whatever order they finish in
// (node:http queues them), HTTP/1.0 clients get close-delimited bodies or
// keep-alive as they asked, and a HEAD, 204 or 304 gets no body. What needs
// no engine (abort callback, response state flags, byte counting) comes from
// ClientState.
//
// Request bodies are not read until the data plane asks for them (onBody):
// until routing, limits and middlewares said yes, the socket stays paused
// (TCP backpressure, nothing buffered here), and `Expect: 100-continue` gets
// its 100 only then; a request answered before (413, 401...) gets no 100, and
// node:http closes the connection after that answer (RFC 9110 §10.1.1).
import type { IncomingMessage, ServerResponse } from 'node:http'
import type net from 'node:net'
import type { ClientResponse } from '../client.js'
import { ClientState } from '../client-state.js'
import type { SentCounter } from '../listen-options.js'
import { UWS_LAST_CHUNK, uwsChunk } from '../response-head.js'
import type { WebSocketUpgrade, WsSession } from '../../ws/ws-client.js'

const EMPTY = Buffer.alloc(0)
/** "HTTP/1.1 100 Continue\r\n\r\n" */
const CONTINUE_BYTES = 25
const NON_ASCII = /[^\x00-\x7f]/ // eslint-disable-line no-control-regex

/**
 * Text as node:http writes it (latin1, one byte per character) for a value lb
 * holds as decoded UTF-8: its UTF-8 bytes, one character each, so that the
 * wire carries the UTF-8 the server sent (as on uWS). ASCII, the usual case, is returned as is.
 */
export function wireText (v: string): string {
  return NON_ASCII.test(v) ? Buffer.from(v, 'utf8').toString('latin1') : v
}

/** Text node:http read (latin1: a character a byte) as lb holds it: the bytes decoded as UTF-8, as uWS gives them. */
export function fromWire (v: string): string {
  return NON_ASCII.test(v) ? Buffer.from(v, 'latin1').toString('utf8') : v
}

/** One client connection's state on the node engine (engine.ts keeps it on the socket). */
export class NodeConn {
  /** the client's address, canonical text */
  readonly remote: string
  /** an answer that closes this connection was sent: requests pipelined behind it are not served */
  closing = false
  /** requests of this connection whose response has not ended: told when the connection closes */
  readonly live = new Set<NodeClient>()
  /** runs once no request is open any more (engine.ts: an answer to what llhttp refused, after those before it) */
  #idle: (() => void) | null = null

  constructor (remote: string) {
    this.remote = remote
  }

  whenIdle (cb: () => void): void {
    this.closing = true
    this.#idle = cb
  }

  /** A request's response ended (or was handed over). */
  done (c: NodeClient): void {
    this.live.delete(c)
    const cb = this.#idle
    if (cb !== null && this.live.size === 0) {
      this.#idle = null
      cb()
    }
  }

  /** Every open request of the connection was read whole (its body too). */
  allRead (): boolean {
    for (const c of this.live) if (!c.requestRead) return false
    return true
  }

  /** The connection closed: every request still open on it is aborted. */
  closed (): void {
    this.#idle = null
    for (const c of this.live) c.lost()
    this.live.clear()
  }
}

/** What accepting a WebSocket needs of the engine (ws.ts); null for a plain request. */
export interface NodeWsAccept {
  (session: WsSession, key: string, protocol: string, headers: readonly string[]): boolean
}

export class NodeClient extends ClientState implements ClientResponse, WebSocketUpgrade {
  readonly websocket: WebSocketUpgrade | null
  readonly #req: IncomingMessage
  readonly #res: ServerResponse
  readonly #conn: NodeConn
  readonly #acceptWs: NodeWsAccept | null
  /** Expect: 100-continue, and no 100 written yet */
  #expect: boolean
  /** the head said chunked: every write is framed (counted as sent) */
  #chunked = false
  /** body bytes written of a response with a known length (total) */
  #written = 0

  constructor (req: IncomingMessage, res: ServerResponse, conn: NodeConn, asksClose: boolean, expect: boolean, sent: SentCounter | null,
    acceptWs: NodeWsAccept | null = null) {
    // llhttp reads chunk sizes strictly: a chunked body needs no containment here (ClientState.chunkedBody)
    super(req.method === 'HEAD', asksClose, false, sent)
    this.#req = req
    this.#res = res
    this.#conn = conn
    this.#expect = expect
    this.#acceptWs = acceptWs
    this.websocket = acceptWs === null ? null : this
    conn.live.add(this)
    res.once('close', () => {
      conn.done(this)
      if (!res.writableFinished) this.lost()
    })
    res.on('drain', () => { const cb = this.drainCb; if (cb !== null) cb() })
  }

  /** node:http read the whole request, its body included */
  get requestRead (): boolean {
    return this.#req.complete
  }

  /** The client went away (its connection closed) before this response ended. */
  lost (): void {
    if (!this.aborted) this.gone()
  }

  override onBody (cb: (chunk: Buffer, last: boolean) => void): void {
    const req = this.#req
    if (this.#expect) {
      // routing, limits and middlewares said yes: the client may send its body now
      this.#expect = false
      if (!this.aborted && !this.ended) {
        this.count(CONTINUE_BYTES)
        this.#res.writeContinue()
      }
    }
    req.on('data', (chunk: Buffer) => { cb(chunk, false) })
    req.once('end', () => {
      const raw = req.rawTrailers
      if (raw.length > 0) this.trailers = lowerNames(raw)
      cb(EMPTY, true)
    })
  }

  pauseBody (): void {
    if (this.aborted || this.ended) return
    this.bodyPaused = true
    this.#req.pause()
  }

  resumeBody (): void {
    if (!this.bodyPaused) return
    this.bodyPaused = false
    this.#req.resume()
  }

  override head (status: number, reason: string, headers: readonly string[], contentLength: number): void {
    this.started = true
    this.total = contentLength
    this.#writeHead(status, reason, headers, contentLength, false)
  }

  /** Hands the head to node:http (written with the first body bytes or the end), counted. False: it was refused and the connection is cut. */
  #writeHead (status: number, reason: string, headers: readonly string[], length: number, close: boolean): boolean {
    const res = this.#res
    const list: string[] = []
    for (let i = 0; i < headers.length; i += 2) list.push(headers[i]!, wireText(headers[i + 1]!))
    if (length >= 0) list.push('content-length', String(length))
    if (close) list.push('connection', 'close')
    try {
      res.writeHead(status, reason === '' ? undefined : wireText(reason), list)
    } catch {
      // a name or value node:http refuses (it checks them as uWS does not): nothing can be sent honestly
      this.ended = true
      res.destroy()
      return false
    }
    // node:http's head text (ServerResponse._header, latin1: one byte a character), as it will be written
    this.count((res as unknown as { _header: string })._header.length)
    this.#chunked = (res as unknown as { chunkedEncoding: boolean }).chunkedEncoding
    return true
  }

  body (buf: Buffer, start: number, end: number): boolean {
    if (this.aborted || this.ended) return true
    const n = end - start
    if (n === 0) return true
    if (this.#chunked) this.count(uwsChunk(n)) // node:http frames each write as uWS does: hex size CRLF data CRLF
    // a copy: buf is the upstream connection's reused read buffer, and node:http may hold the bytes
    const ok = this.#res.write(Buffer.from(buf.subarray(start, end)))
    if (this.total >= 0 && (this.#written += n) >= this.total) {
      // the last byte of a known length ends the response, as uWS's tryEnd does (ProxyExchange relies on it)
      this.end()
      return true
    }
    return ok
  }

  end (): void {
    if (this.aborted || this.ended) return
    this.ended = true
    if (this.#chunked) this.count(UWS_LAST_CHUNK)
    this.#res.end()
  }

  send (status: number, headers: readonly string[], body: string, close = false): void {
    if (this.aborted || this.ended) return
    this.started = true
    this.ended = true
    if (close) this.#conn.closing = true
    if (this.#writeHead(status, '', headers, Buffer.byteLength(body), close)) this.#res.end(this.headRequest ? undefined : body)
  }

  destroy (): void {
    if (this.aborted || this.ended) return
    this.ended = true
    this.#res.destroy()
  }

  accept (session: WsSession, key: string, protocol: string, headers: readonly string[]): boolean {
    if (this.aborted || this.ended || this.#acceptWs === null) return false
    this.started = true
    this.ended = true // the connection is the WebSocket's from now on
    this.#conn.done(this)
    const res = this.#res
    res.detachSocket(res.socket as net.Socket)
    return this.#acceptWs(session, key, protocol, headers)
  }
}

/** node:http's raw trailer list with lower-case names, as request headers are kept (Ctx.headers). */
function lowerNames (raw: readonly string[]): string[] {
  const out: string[] = []
  for (let i = 0; i + 1 < raw.length; i += 2) out.push(raw[i]!.toLowerCase(), raw[i + 1]!)
  return out
}
