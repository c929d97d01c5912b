// One keep-alive connection to an upstream server. Reads go into one buffer
// shared by every upstream socket of this thread (net `onread`): a read is
// parsed and handed on before the next read can happen, so nothing in it
// outlives the callback and reads allocate nothing.
import net from 'node:net'
import tls from 'node:tls'
import type { ErrorCode } from '../errors.js'
import { now } from '../clock.js'
import type { Indexed } from '../indexed-set.js'
import { type AtTurnEnd, atTurnEnd } from '../net/turn.js'
import { ResponseParser, type ResponseSink } from './response-parser.js'
import { onServerHandshake } from './tls-handshakes.js'

const READ_BUFFER = Buffer.allocUnsafe(64 * 1024)

/** The request side of one request/response over a connection (core/worker/proxy/proxy.ts). */
export interface Exchange extends ResponseSink {
  /** the connection is ready for this exchange's request */
  onConnected (conn: UpstreamConnection): void
  /** the exchange failed; the connection is already destroyed */
  onUpstreamError (code: ErrorCode, conn: UpstreamConnection): void
  /** the whole request (head and body) has been written */
  readonly requestComplete: boolean
}

/**
 * What a connection needs of the pool that owns it. ServerPool (pool.ts)
 * implements it; pool.ts imports this module and never the reverse.
 */
export interface ConnectionOwner {
  readonly server: { readonly host: string, readonly port: number, readonly path: string }
  /** TLS to the server (its name checked against `server.host`): a model server's https:// URL (core/gen/remote/http-call.ts) */
  readonly secure: boolean
  /** ms the server may stay silent while answering */
  readonly serverTimeoutMs: number
  /** the connection closed: drop it from the pool */
  forget (conn: UpstreamConnection): void
  /** the connection finished an exchange and may be reused */
  release (conn: UpstreamConnection): void
}

export class UpstreamConnection implements ResponseSink, AtTurnEnd, Indexed {
  readonly socket: net.Socket
  readonly pool: ConnectionOwner
  readonly parser = new ResponseParser()
  exchange: Exchange | null = null
  connected = false
  closed = false
  /** position in the pool's busy set, -1 when not busy (IndexedSet, owned by ServerPool) */
  setIndex = -1
  /** requests started on this connection, the current one included */
  uses = 0
  /** tick after which the current phase times out (or the idle connection is closed) */
  deadline = 0
  /** why the parser refused the current response (LB_ERR_UPSTREAM_PROTOCOL; its value at fault: parser.detail), '' when it did not */
  protocolError = ''
  /** the socket's error, in node's words ("connect ECONNREFUSED ...", a TLS certificate's fault), '' when none */
  socketError = ''
  /** reading stopped because the client cannot take more (see resume) */
  #paused = false
  /** a request head waiting for the end of this loop turn (writeAtTurnEnd), '' when none */
  #atTurnEnd = ''
  /** what was written after that head in the same turn (body pieces), in order; null when nothing */
  #afterHead: Array<string | Buffer> | null = null

  constructor (pool: ConnectionOwner) {
    this.pool = pool
    const { host, port, path } = pool.server
    if (pool.secure) {
      // node:tls has no `onread`: its reads are Buffers of their own, handed on as the shared buffer's views are
      const s = tls.connect({ host, port, servername: net.isIP(host) === 0 ? host : undefined, ALPNProtocols: ['http/1.1'] })
      s.setNoDelay(true)
      s.once('secureConnect', onServerHandshake)
      s.on('data', (d: Buffer) => { if (!this.#onRead(d.length, d)) s.pause() })
      this.socket = s
    } else {
      const onread = { buffer: READ_BUFFER, callback: (n: number, buf: Uint8Array): boolean => this.#onRead(n, buf as Buffer) }
      const opts = path !== '' ? { path, onread } : { host, port, onread, noDelay: true }
      this.socket = net.connect(opts as net.NetConnectOpts)
    }
    this.socket.on(pool.secure ? 'secureConnect' : 'connect', () => {
      this.connected = true
      const ex = this.exchange
      if (ex !== null) ex.onConnected(this)
    })
    this.socket.on('error', (e) => {
      this.socketError = e.message
      this.#fail()
    })
    this.socket.on('close', () => { this.#fail() })
  }

  /** Binds an exchange; the head of its response is expected next. */
  assign (exchange: Exchange, isHead: boolean, deadline: number): void {
    this.exchange = exchange
    this.#paused = false
    this.uses++
    this.deadline = deadline
    this.protocolError = ''
    this.parser.reset(this, isHead)
  }

  /**
   * Strings go out as UTF-8: request text from uWS (path, query, header values) is UTF-8-decoded, so this restores its bytes.
   * Behind a head held for the turn's end, `data` joins it there (true: the turn bounds what is held).
   */
  write (data: string | Buffer): boolean {
    if (this.#atTurnEnd === '') return this.socket.write(data)
    if (this.#afterHead === null) this.#afterHead = [data]
    else this.#afterHead.push(data)
    return true
  }

  /**
   * Writes a request head at the end of this loop turn (core/net/turn.ts says why), with what write() is given
   * after it in the same turn: a body that came with its head (an h2 DATA frame read with the HEADERS, a small
   * upload in the request's packet) goes out in the same system call, not one more.
   */
  writeAtTurnEnd (head: string): void {
    this.#atTurnEnd = head
    atTurnEnd(this)
  }

  turnEnd (): void {
    const head = this.#atTurnEnd
    const after = this.#afterHead
    this.#atTurnEnd = ''
    this.#afterHead = null
    if (this.closed) return
    if (after === null) {
      this.socket.write(head)
      return
    }
    // one writev for the head and the pieces after it
    this.socket.cork()
    this.socket.write(head)
    for (let i = 0; i < after.length; i++) this.socket.write(after[i]!)
    this.socket.uncork()
  }

  destroy (): void {
    if (this.closed) return
    this.closed = true
    this.exchange = null
    this.socket.destroy()
    this.pool.forget(this)
  }

  /** Ends the connection and fails its exchange with `code` (the sweeper, when `deadline` passed; an invalid response). */
  expire (code: ErrorCode): void {
    const ex = this.exchange
    this.destroy()
    if (ex !== null) ex.onUpstreamError(code, this)
  }

  onHead (status: number, reason: string, headers: string[], contentLength: number): void {
    this.exchange!.onHead(status, reason, headers, contentLength)
  }

  onBody (buf: Buffer, start: number, end: number): boolean {
    const ex = this.exchange
    if (ex !== null && !ex.onBody(buf, start, end)) this.#paused = true
    return !this.#paused
  }

  /** Reads again after the client drained. */
  resume (): void {
    if (!this.#paused || this.closed) return
    this.#paused = false
    this.socket.resume()
  }

  onEnd (): void {
    const ex = this.exchange
    this.exchange = null
    if (ex === null) return
    const reusable = this.parser.keepAlive && ex.requestComplete
    if (this.#paused) {
      // the client side holds the rest of this response; an idle connection must keep reading (to see a close)
      this.#paused = false
      this.socket.resume()
    }
    ex.onEnd()
    if (this.closed) return
    if (reusable) this.pool.release(this)
    else this.destroy()
  }

  #onRead (n: number, buf: Buffer): boolean {
    if (this.exchange === null) {
      // bytes on an idle connection: the server broke the protocol; drop it
      this.destroy()
      return false
    }
    this.deadline = now() + this.pool.serverTimeoutMs
    const bad = this.parser.feed(buf, 0, n)
    if (bad !== null) {
      this.protocolError = bad
      this.expire('LB_ERR_UPSTREAM_PROTOCOL')
      return false
    }
    return !this.#paused // false pauses the socket (net onread contract)
  }

  #fail (): void {
    if (this.closed) return
    const ex = this.exchange
    const finished = this.parser.close() // a close-delimited body ends here (and its onEnd may have destroyed this already)
    this.destroy()
    if (ex === null || finished) return
    ex.onUpstreamError(this.connected ? 'LB_ERR_UPSTREAM_RESET' : 'LB_ERR_UPSTREAM_CONNECT', this)
  }
}
