// Mirroring's copies (a `mirroring` service, core/config/service-group.ts): the
// request as it goes to the main server (the same head, its body when it is
// within max_body_size) sent to a server of each mirror, the answer read and
// dropped. A copy never slows the request it copies: it leaves once the body has
// ended (held in memory until then, at most max_body_size per request), on its
// own upstream connection, and its failure is the mirror's alone (counted on the
// mirror's server, never answered, never logged per request). A body larger
// than the bound ends the copies of that request.
import { now } from '../../clock.js'
import type { ErrorCode } from '../../errors.js'
import type { Exchange, UpstreamConnection } from '../../upstream/connection.js'
import type { ExchangeHost, ServiceRuntime } from '../runtime.js'
import { endOfChunked, writeBodyPiece } from './forward-head.js'
import { ServerTries } from './server-tries.js'

/** One copy to one mirror. */
class MirrorExchange extends ServerTries implements Exchange {
  requestComplete = false
  readonly #head: string
  readonly #body: readonly Buffer[]
  readonly #chunked: boolean
  #bytes = 0

  constructor (host: ExchangeHost, svc: ServiceRuntime, head: string, body: readonly Buffer[], chunked: boolean) {
    super(host, svc)
    this.#head = head
    this.#body = body
    this.#chunked = chunked
  }

  send (remoteAddress: string): void {
    const server = this.claimServer(remoteAddress, false)
    if (server !== null) server.pool.acquire(this, false)
  }

  onConnected (conn: UpstreamConnection): void {
    // the whole copy leaves in one write at the turn's end: the head, then its body pieces behind it
    conn.writeAtTurnEnd(this.#head)
    for (const b of this.#body) {
      writeBodyPiece(conn, b, this.#chunked)
      this.#bytes += b.length
    }
    if (this.#chunked) conn.write(endOfChunked(null))
    this.requestComplete = true
    conn.deadline = now() + conn.pool.serverTimeoutMs
  }

  onHead (): void {}
  onBody (): boolean { return true }
  onEnd (): void { this.releaseTry(this.#head.length + this.#bytes, 0) }

  onUpstreamError (_code: ErrorCode, conn: UpstreamConnection): void {
    this.tryFailed(!conn.connected)
    this.releaseTry(0, 0)
  }
}

/** The copies of one request: body pieces gathered as they pass (add), sent when the body ends. */
export class Mirrors {
  readonly #host: ExchangeHost
  readonly #to: readonly ServiceRuntime[]
  readonly #head: (svc: ServiceRuntime) => string
  readonly #max: number
  readonly #chunked: boolean
  #body: Buffer[] | null = []
  #size = 0

  /** `head`: the request head as it would go to a server of that service. */
  constructor (host: ExchangeHost, to: readonly ServiceRuntime[], head: (svc: ServiceRuntime) => string, maxBodyBytes: number, chunked: boolean) {
    this.#host = host
    this.#to = to
    this.#head = head
    this.#max = maxBodyBytes
    this.#chunked = chunked
  }

  /** A piece of the body (a copy the caller will not change); `last`: the body ended, the copies leave. */
  add (piece: Buffer | null, last: boolean, remoteAddress: string): void {
    const body = this.#body
    if (body === null) return
    if (piece !== null && piece.length > 0) {
      this.#size += piece.length
      if (this.#size > this.#max) {
        this.#body = null // over the bound: this request is not mirrored
        return
      }
      body.push(piece)
    }
    if (!last) return
    this.#body = null
    for (const svc of this.#to) new MirrorExchange(this.#host, svc, this.#head(svc), body, this.#chunked).send(remoteAddress)
  }
}
