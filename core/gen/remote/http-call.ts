// One POST to a model server, made with the data plane's own HTTP/1.1 client
// (core/upstream: keep-alive pools per server, the response parser that hands
// on views of one read buffer) instead of undici's request(): no Readable, no
// promise per chunk, and half undici's CPU per request (bench/RESULTS.md,
// "Upstream client"). Used for every text and embedding request to a model
// server, from the control plane's service and the data-plane workers' relay
// (client.ts, embed-client.ts); the listings' GETs stay on undici
// (server.ts). Each thread keeps its own pools, one per server URL (http://
// or https://).
//
// Time-outs: a model may take minutes to its first token, so the server's
// silence is not bounded here (request_timeout bounds the request: run.ts);
// connecting is (CONNECT_MS).

import { now } from '../../clock.js'
import { ERRORS, type ErrorCode } from '../../errors.js'
import type { Exchange, UpstreamConnection } from '../../upstream/connection.js'
import { ServerPool } from '../../upstream/pool.js'

/** What a call's reply is handed to. Exactly one of end and error ends it, unless the call was cancelled. */
export interface CallReply {
  head (status: number): void
  /** Body bytes buf[start, end), valid during the call only. A promise returned stops reading until it settles. */
  body (buf: Buffer, start: number, end: number): Promise<unknown> | null
  end (): void
  /** The call failed before its end: `reason` in words; `head`: the response's head had come. */
  error (reason: string, head: boolean): void
}

/** ms to connect (and finish the TLS handshake), as undici's default. */
const CONNECT_MS = 10_000
/** ms an idle connection is kept: under the 5 s of Node's and uvicorn's servers, so that lb closes it first. */
const KEEP_ALIVE_MS = 4_000
/**
 * Idle connections kept per server and thread, each for KEEP_ALIVE_MS: a burst of streams finds the last burst's
 * connections (as undici kept them), where a smaller number would close the rest after a second (core/upstream/pool.ts).
 */
const MAX_IDLE = 4096
/** The server's silence is bounded by request_timeout, not here: ~12 days, within the int32 ms tick's range. */
const NO_TIMEOUT_MS = 2 ** 30
/** ms a reply whose last message came is given to end its HTTP framing before its connection is closed */
const END_GRACE_MS = 1_000

/** A server URL's pool and what every request to it starts with. */
interface Target {
  readonly pool: ServerPool
  /** the URL's path, without its last slash: the API's paths follow it */
  readonly prefix: string
  readonly host: string
}

/** by the server's URL as configured */
const targets = new Map<string, Target>()

function targetOf (url: string): Target {
  let t = targets.get(url)
  if (t === undefined) {
    const u = new URL(url)
    const secure = u.protocol === 'https:'
    const port = u.port === '' ? (secure ? 443 : 80) : Number(u.port)
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1') // an IPv6 address without its brackets
    const pool = new ServerPool({
      name: u.origin, address: u.host, host, port, path: '', weight: 1, maxFails: 0, failTimeoutMs: 0, check: false, maintenance: false,
    }, { maxIdle: MAX_IDLE, connectTimeoutMs: CONNECT_MS, serverTimeoutMs: NO_TIMEOUT_MS, keepAliveMs: KEEP_ALIVE_MS, secure })
    t = { pool, prefix: u.pathname.replace(/\/$/, ''), host: u.host }
    targets.set(url, t)
  }
  return t
}

/** Why a call failed, in words: node's own for a socket error (as undici's were), lb's for the rest. */
function reasonFor (code: ErrorCode, conn: UpstreamConnection): string {
  if (conn.socketError !== '') return conn.socketError
  if (code === 'LB_ERR_UPSTREAM_TIMEOUT' && !conn.connected) return `connecting timed out after ${CONNECT_MS / 1000} s`
  if (code === 'LB_ERR_UPSTREAM_PROTOCOL') return `${ERRORS[code].message}: ${conn.protocolError}`
  return ERRORS[code].message
}

class ModelCall implements Exchange {
  requestComplete = false
  readonly #pool: ServerPool
  readonly #request: string
  readonly #reply: CallReply
  #conn: UpstreamConnection | null = null
  #head = false
  #done = false
  /** the reply's end was told (a reply that ends itself early: `finish`): what follows is read and dropped */
  #told = false
  /** the tick by which the HTTP framing must end once the reply's end was told (each read would move it on) */
  #graceUntil = 0

  constructor (pool: ServerPool, request: string, reply: CallReply) {
    this.#pool = pool
    this.#request = request
    this.#reply = reply
  }

  start (): void {
    this.#conn = this.#pool.acquire(this, false)
  }

  onConnected (conn: UpstreamConnection): void {
    conn.writeAtTurnEnd(this.#request)
    this.requestComplete = true
    conn.deadline = now() + NO_TIMEOUT_MS
  }

  onHead (status: number): void {
    this.#head = true
    this.#reply.head(status)
  }

  onBody (buf: Buffer, start: number, end: number): boolean {
    if (this.#told) {
      if (this.#conn !== null) this.#conn.deadline = this.#graceUntil
      return true
    }
    const wait = this.#reply.body(buf, start, end)
    if (wait === null) return true
    const conn = this.#conn
    const resume = (): void => { if (conn !== null && conn.exchange === this) conn.resume() }
    wait.then(resume, resume)
    return false
  }

  onEnd (): void {
    this.#done = true
    this.#conn = null
    if (!this.#told) this.#reply.end()
  }

  onUpstreamError (code: ErrorCode, conn: UpstreamConnection): void {
    this.#conn = null
    if (this.#done || this.#told) return
    // A kept-alive connection the server closed while it was idle fails before any byte of a reply: the request
    // goes again on another connection (fresh ones at last), as a failure before the first piece does anyway.
    if (!this.#head && conn.uses > 1 && code === 'LB_ERR_UPSTREAM_RESET') {
      this.start()
      return
    }
    this.#done = true
    this.#reply.error(reasonFor(code, conn), this.#head)
  }

  /** The reply told its end before the HTTP framing's: the rest is read (to keep the connection) for END_GRACE_MS at most. */
  finish (): void {
    this.#told = true
    this.#graceUntil = now() + END_GRACE_MS
    if (this.#conn !== null) this.#conn.deadline = this.#graceUntil
  }

  /** Ends the call; nothing more is told. The server sees its connection close. */
  cancel (): void {
    if (this.#done) return
    this.#done = true
    const conn = this.#conn
    this.#conn = null
    if (conn !== null && conn.exchange === this) conn.destroy()
  }
}

/** A call under way: `finish` when the reply was complete before its framing ended, `cancel` to drop it. */
export interface CallHandle {
  finish (): void
  cancel (): void
}

/**
 * POSTs `body` to `url` + `path` with `headers` (its content-type among them: they are written as they are), the
 * reply handed to `reply` as it arrives. An aborted `signal` cancels the call (the server sees its connection close
 * at once) and nothing more is told.
 */
export function post (url: string, path: string, headers: Readonly<Record<string, string>>, body: string, signal: AbortSignal, reply: CallReply): CallHandle {
  const t = targetOf(url)
  let head = `POST ${t.prefix}${path} HTTP/1.1\r\nhost: ${t.host}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`
  for (const k in headers) head += `${k}: ${headers[k]}\r\n`
  const call = new ModelCall(t.pool, `${head}\r\n${body}`, reply)
  if (signal.aborted) return call
  signal.addEventListener('abort', () => call.cancel(), { once: true })
  call.start()
  return call
}

/** A whole reply: its status and its text, or why the call failed (null: `signal` cancelled it). */
export type Whole = { status: number, text: string } | { failed: string | null }

/** POSTs as `post` does and reads the whole reply, `max` bytes at most (a larger one fails the call). */
export function postForText (url: string, path: string, headers: Readonly<Record<string, string>>, body: string, signal: AbortSignal, max: number): Promise<Whole> {
  return new Promise((resolve) => {
    if (signal.aborted) { resolve({ failed: null }); return }
    signal.addEventListener('abort', () => resolve({ failed: null }), { once: true })
    let status = 0
    let size = 0
    const chunks: Buffer[] = []
    const call = post(url, path, headers, body, signal, {
      head (s) { status = s },
      body (buf, start, end) {
        size += end - start
        if (size > max) {
          call.cancel()
          resolve({ failed: `a reply larger than ${max} bytes` })
        } else chunks.push(Buffer.from(buf.subarray(start, end))) // a view of a reused buffer
        return null
      },
      end () { resolve({ status, text: Buffer.concat(chunks).toString('utf8') }) },
      error (reason, head) { resolve({ failed: head ? `the reply broke off: ${reason}` : reason }) },
    })
  })
}
