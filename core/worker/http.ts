// The only importer of uWebSockets.js. It copies each request into a Ctx
// synchronously (uWS request objects live only during the callback), attaches
// onAborted at once, corks every write made outside the request callback, and
// streams bodies with tryEnd/onWritable (known length) or write (chunked) with
// backpressure reported to the caller.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { STATUS_CODES } from 'node:http'
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js'
import { lbError } from '../errors.js'
import { canonicalIp } from '../net/ip.js'
import type { ClientResponse } from './client.js'
import { Ctx } from './context.js'

type Uws = typeof import('uWebSockets.js')

/**
 * Loads uWS and proves its native binary is mapped into this process. The
 * package silently falls back to a slow pure-JS server (with only a console
 * warning) when its .node file fails to load; we refuse to run on that.
 */
export function loadUws (): Uws {
  const require = createRequire(import.meta.url)
  const warn = console.warn
  let warned = ''
  console.warn = (...args: unknown[]) => { warned += args.join(' ') }
  let uws: Uws
  try {
    uws = require('uWebSockets.js') as Uws
  } finally {
    console.warn = warn
  }
  const fallback = Object.keys(require.cache).some((k) => /(uWebSockets\.js|uws-js-unofficial)[\\/]dist[\\/]/.test(k))
  const native = /\S*uws_[a-z0-9_]+\.node/.exec(readFileSync('/proc/self/maps', 'utf8'))
  if (fallback || native === null) {
    throw lbError('LB_ERR_UWS_FALLBACK', { reason: warned !== '' ? warned.trim() : 'no uws_*.node mapped in /proc/self/maps' })
  }
  return uws
}

const STATUS_LINE: string[] = []
for (const [code, text] of Object.entries(STATUS_CODES)) STATUS_LINE[Number(code)] = `${code} ${text}`

function statusLine (status: number, reason: string): string {
  const std = STATUS_LINE[status]
  if (std !== undefined && (reason === '' || (std.length === reason.length + 4 && std.endsWith(reason)))) return std
  return `${status} ${reason === '' ? 'Unknown' : reason}`
}

const decoder = new TextDecoder()

/** Writes status and headers; must run corked. */
function writeHead (res: HttpResponse, status: number, reason: string, headers: readonly string[]): void {
  res.writeStatus(statusLine(status, reason))
  for (let i = 0; i < headers.length; i += 2) res.writeHeader(headers[i]!, headers[i + 1]!)
}

class UwsClient implements ClientResponse {
  readonly #res: HttpResponse
  aborted = false
  started = false
  #ended = false
  #abortCb: (() => void) | null = null
  #bodyCb: ((chunk: Buffer, last: boolean) => void) | null = null
  #early: Array<{ chunk: Buffer, last: boolean }> | null = null
  #drainCb: (() => void) | null = null
  // response body state
  #total = -1 // Content-Length being streamed with tryEnd, or -1 for chunked writes
  #head: { status: number, reason: string, headers: readonly string[], headRequest: boolean } | null = null
  #pending: Buffer[] | null = null // tryEnd mode: copies not yet accepted by uWS
  #pendingOffset = 0 // write offset at which pending[0] starts

  readonly #headRequest: boolean

  constructor (res: HttpResponse, expectBody: boolean, headRequest: boolean) {
    this.#res = res
    this.#headRequest = headRequest
    res.onAborted(() => {
      this.aborted = true
      const cb = this.#abortCb
      this.#abortCb = null
      if (cb !== null && !this.#ended) cb()
    })
    if (expectBody) {
      res.onData((ab, last) => {
        const cb = this.#bodyCb
        if (cb !== null) {
          cb(Buffer.from(ab), last)
          return
        }
        // no consumer yet (a middleware is still deciding): keep a copy, the ArrayBuffer is neutered on return
        ;(this.#early ??= []).push({ chunk: Buffer.from(ab.slice(0)), last })
      })
    }
  }

  onAbort (cb: () => void): void { this.#abortCb = cb }

  onBody (cb: (chunk: Buffer, last: boolean) => void): void {
    this.#bodyCb = cb
    const early = this.#early
    this.#early = null
    if (early !== null) for (const e of early) cb(e.chunk, e.last)
  }

  pauseBody (): void { if (!this.aborted) this.#res.pause() }
  resumeBody (): void { if (!this.aborted) this.#res.resume() }

  head (status: number, reason: string, headers: readonly string[], contentLength: number, headRequest: boolean): void {
    this.started = true
    this.#total = contentLength
    // Deferred until the first body bytes or the end, so that a small response
    // goes out as one corked write (status, headers and body together).
    this.#head = { status, reason, headers, headRequest }
  }

  body (buf: Buffer, start: number, end: number): boolean {
    if (this.aborted || this.#ended) return true
    if (this.#pending !== null) {
      this.#pending.push(Buffer.from(buf.subarray(start, end)))
      return false
    }
    let ok = true
    this.#res.cork(() => {
      const res = this.#res
      const h = this.#head
      if (h !== null) {
        this.#head = null
        writeHead(res, h.status, h.reason, h.headers)
      }
      const view = buf.subarray(start, end)
      if (this.#total < 0) {
        ok = res.write(view)
        return
      }
      if (h !== null && view.length === this.#total) {
        // the whole body in one piece (the common small response): a plain end
        res.end(view)
        this.#ended = true
        return
      }
      const offset = res.getWriteOffset()
      const [sent, done] = res.tryEnd(view, this.#total)
      if (done) this.#ended = true
      else if (!sent) {
        ok = false
        this.#pending = [Buffer.from(view)]
        this.#pendingOffset = offset
      }
    })
    if (!ok) this.#watchWritable()
    return ok
  }

  #watchWritable (): void {
    this.#res.onWritable((offset) => {
      if (this.aborted) return true
      const p = this.#pending
      if (p !== null) {
        // tryEnd mode: resend from the first byte uWS did not take
        while (p.length > 0) {
          const chunk = p[0]!.subarray(offset - this.#pendingOffset)
          const [sent, done] = this.#res.tryEnd(chunk, this.#total)
          if (done) {
            this.#ended = true
            p.length = 0
            break
          }
          if (!sent) return false
          offset = this.#res.getWriteOffset()
          this.#pendingOffset = offset
          p.shift()
        }
        this.#pending = null
      }
      const cb = this.#drainCb
      if (cb !== null) cb()
      return true
    })
  }

  onDrain (cb: () => void): void { this.#drainCb = cb }

  end (): void {
    if (this.aborted || this.#ended) return
    if (this.#pending !== null) {
      // tryEnd completes the response by itself once the last pending byte is taken
      return
    }
    this.#ended = true
    this.#res.cork(() => {
      const res = this.#res
      const h = this.#head
      if (h !== null) {
        this.#head = null
        writeHead(res, h.status, h.reason, h.headers)
        if (h.headRequest) {
          if (this.#total >= 0) res.endWithoutBody(this.#total)
          else res.endWithoutBody()
          return
        }
      }
      res.end()
    })
  }

  send (status: number, headers: readonly string[], body: string, close = false): void {
    if (this.aborted || this.#ended) return
    this.started = true
    this.#ended = true
    this.#res.cork(() => {
      writeHead(this.#res, status, '', headers)
      if (this.#headRequest) this.#res.endWithoutBody(Buffer.byteLength(body), close)
      else this.#res.end(body, close)
    })
  }

  destroy (): void {
    if (this.aborted || this.#ended) return
    this.#ended = true
    this.#res.close()
  }
}

export type RequestHandler = (ctx: Ctx, client: ClientResponse) => void

// App.close() (all listen sockets and connections) exists in this binary but not in its type definitions
type ClosableApp = TemplatedApp & { close (): void }
const apps: ClosableApp[] = []

/**
 * Closes every app of this thread with all its connections. A worker thread
 * must call this before it ends (process 'exit'): ending with uWS sockets still
 * registered in the thread's libuv loop trips a libuv assertion that aborts the
 * whole process, not just the thread.
 */
export function closeAllApps (): void {
  for (const app of apps.splice(0)) app.close()
}

export interface Listener {
  close (): void
}

/**
 * Starts a uWS app for one entry point. Every request is copied into a Ctx and
 * handed to `handler`. Resolves once listening (SO_REUSEPORT: every worker
 * listens on the same address and the kernel spreads connections).
 */
export function listenHttp (uws: Uws, host: string, port: number, entrypoint: string, proto: 'http' | 'https',
  handler: RequestHandler): Promise<Listener | null> {
  const app = uws.App() as ClosableApp
  apps.push(app)
  app.any('/*', (res: HttpResponse, req: HttpRequest) => {
    const ctx = new Ctx()
    ctx.method = req.getMethod().toUpperCase()
    ctx.path = req.getUrl()
    ctx.query = req.getQuery() ?? ''
    ctx.entrypoint = entrypoint
    ctx.proto = proto
    const headers = ctx.headers
    let expectBody = false
    req.forEach((k, v) => {
      headers.push(k, v)
      if (k === 'content-length') {
        ctx.contentLength = /^\d+$/.test(v) ? Number(v) : -2
        if (ctx.contentLength > 0) expectBody = true
      } else if (k === 'transfer-encoding') {
        ctx.chunked = true
        ctx.contentLength = -1
        expectBody = true
      } else if (k === 'host') {
        const colon = v.lastIndexOf(':')
        ctx.host = (colon > 0 && v.indexOf(']') < colon ? v.slice(0, colon) : v).toLowerCase()
      }
    })
    ctx.remoteAddress = canonicalIp(decoder.decode(res.getRemoteAddressAsText()))
    handler(ctx, new UwsClient(res, expectBody, ctx.method === 'HEAD'))
  })
  return new Promise((resolve) => {
    app.listen(host, port, (token: us_listen_socket | false) => {
      if (token === false) {
        resolve(null)
        return
      }
      resolve({ close: () => uws.us_listen_socket_close(token) })
    })
  })
}
