// One request to a service with protocol = "h2c" or "h2" (gRPC): a stream on the
// server's HTTP/2 session (core/upstream/h2-pool.ts). Bodies stream both ways
// with backpressure (a write the peer's window cannot take pauses the other
// side until 'drain'), trailers (grpc-status, grpc-message) are relayed, a
// client that goes away resets the upstream stream (RST_STREAM CANCEL), an
// upstream reset after the response began resets the client's stream, and
// grpc-timeout is honoured, bounded by timeouts.server. Not tried on another
// server: a gRPC call may have had effects (no retries here yet).
import type { Ctx } from '../request/context.js'
import type { ClientResponse } from '../transport/client.js'
import { ServerTries } from './server-tries.js'
import type { ExchangeHost, RouteTarget } from '../runtime.js'
import { H2_CANCEL, H2_NO_ERROR } from '../../upstream/h2-pool.js'
import { Base64Reader, GRPC_WEB_TEXT, grpcContentType, trailerFrame, webBody, webContentType } from './grpc-web.js'

/** Request fields not forwarded over HTTP/2 (connection-specific, RFC 9113 §8.2.2; `te` is kept: gRPC needs "trailers"). */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host', 'x-real-ip', 'x-forwarded-proto', 'content-length'])

/** A grpc-status field's value as a number; -1 when it is not one. */
function grpcStatusOf (v: unknown): number {
  return typeof v === 'string' && /^\d{1,2}$/.test(v) ? Number(v) : -1
}

/** grpc-timeout ("100m", "5S"...) in ms; -1 when absent or malformed. */
function grpcTimeoutMs (v: string): number {
  const m = /^(\d{1,8})([HMSmun])$/.exec(v)
  if (m === null) return -1
  const n = Number(m[1])
  switch (m[2]) {
    case 'H': return n * 3_600_000
    case 'M': return n * 60_000
    case 'S': return n * 1000
    case 'm': return n
    case 'u': return Math.ceil(n / 1000)
    default: return Math.ceil(n / 1_000_000)
  }
}

export class H2Exchange extends ServerTries {
  readonly #host: ExchangeHost
  readonly #ctx: Ctx
  readonly #client: ClientResponse
  #done = false
  #timer: NodeJS.Timeout | null = null

  constructor (host: ExchangeHost, ctx: Ctx, client: ClientResponse, target: RouteTarget) {
    super(host, target.service)
    this.#host = host
    this.#ctx = ctx
    this.#client = client
  }

  start (): void {
    const ctx = this.#ctx
    const client = this.#client
    const server = this.claimFor(ctx, false)
    if (server === null) {
      this.#host.error(ctx, client, 'LB_ERR_NO_SERVER', this.noServerParams())
      return
    }
    ctx.server = server.conf.name
    const headers: Record<string, string | string[]> = { ':method': ctx.method, ':path': ctx.query === '' ? ctx.path : ctx.path + '?' + ctx.query, ':scheme': server.h2!.scheme, ':authority': ctx.header('host') || server.conf.address }
    const h = ctx.headers
    let xff = ''
    for (let i = 0; i < h.length; i += 2) {
      const k = h[i]!
      if (HOP.has(k) || (ctx.dropHeaders?.includes(k) ?? false)) continue
      if (k === 'x-forwarded-for') { xff = xff === '' ? h[i + 1]! : xff + ', ' + h[i + 1]!; continue }
      const prev = headers[k]
      headers[k] = prev === undefined ? h[i + 1]! : ([] as string[]).concat(prev, h[i + 1]!)
    }
    const extra = ctx.upstreamHeaders
    if (extra !== null) for (let i = 0; i < extra.length; i += 2) headers[extra[i]!.toLowerCase()] = extra[i + 1]!
    headers['x-real-ip'] = ctx.remoteAddress
    headers['x-forwarded-for'] = xff === '' ? ctx.remoteAddress : xff + ', ' + ctx.remoteAddress
    headers['x-forwarded-proto'] = ctx.proto
    const web = ctx.grpcWeb
    if (web !== 0) {
      // a gRPC-Web call goes to the server as gRPC (grpc-web.ts)
      headers['content-type'] = grpcContentType(ctx.header('content-type'))
      headers.te = 'trailers'
    }
    const serverMs = this.#host.conf.timeouts.serverMs
    const asked = grpcTimeoutMs(ctx.header('grpc-timeout'))
    const deadline = asked < 0 ? serverMs : Math.min(asked, serverMs)
    const up = server.h2!.request(headers, ctx.contentLength === 0)
    let bytesIn = 0
    let bytesOut = 0
    let trailers: string[] = []
    const end = (): void => {
      if (this.#done) return
      this.#done = true
      if (this.#timer !== null) clearTimeout(this.#timer)
      this.releaseTry(bytesOut, bytesIn)
    }
    this.#timer = setTimeout(() => {
      if (this.#done) return
      up.close(H2_CANCEL)
      this.#fail('LB_ERR_UPSTREAM_TIMEOUT', ['grpc-status', '4', 'grpc-message', 'deadline exceeded (lb)'])
    }, deadline)
    client.onAbort(() => {
      if (ctx.status === 0) ctx.status = 499
      ctx.grpcStatus = 1 // CANCELLED: what the client's library reports
      up.close(H2_CANCEL)
      end()
      this.#host.finish(ctx)
    })
    const text = web === GRPC_WEB_TEXT ? new Base64Reader() : null
    if (ctx.contentLength !== 0) {
      client.onBody((chunk, last) => {
        bytesOut += chunk.length
        ctx.bytesIn += chunk.length
        const ok = up.write(text === null ? Buffer.from(chunk) : text.push(chunk, last))
        if (last) up.end()
        else if (!ok) {
          client.pauseBody()
          up.once('drain', () => client.resumeBody())
        }
      })
    }
    up.on('response', (rh) => {
      if (this.#done || client.aborted) return
      const status = Number(rh[':status'])
      ctx.status = status
      ctx.grpcStatus = grpcStatusOf(rh['grpc-status']) // a Trailers-Only answer
      const flat: string[] = []
      for (const [k, v] of Object.entries(rh)) {
        if (k.startsWith(':') || v === undefined) continue
        for (const x of Array.isArray(v) ? v : [String(v)]) flat.push(k, x)
      }
      if (ctx.responseHeaders !== null) flat.push(...ctx.responseHeaders)
      if (web !== 0) {
        const i = flat.indexOf('content-type')
        if (i >= 0 && i % 2 === 0) flat[i + 1] = webContentType(flat[i + 1]!, web)
      }
      client.head(status, '', flat, -1)
    })
    up.on('data', (raw: Buffer) => {
      bytesIn += raw.length
      const d = web === 0 ? raw : webBody(raw, web)
      ctx.bytesOut += d.length
      if (!client.body(d, 0, d.length)) {
        up.pause()
        client.onDrain(() => up.resume())
      }
    })
    up.on('trailers', (th) => {
      for (const [k, v] of Object.entries(th)) if (v !== undefined && !k.startsWith(':')) trailers.push(k, String(v))
      ctx.grpcStatus = grpcStatusOf(th['grpc-status'])
    })
    /** The server's stream ended or failed after the response began without ending it: the client's stream is reset, never ended. */
    const cut = (): void => {
      end()
      this.#host.finish(ctx)
      client.destroy()
    }
    up.on('end', () => {
      if (this.#done) return
      // a session that closed (the server's socket closed) ends its streams' reads too, without END_STREAM:
      // such a stream was reset (CANCEL), and what came, if anything, is not the whole response
      if (up.rstCode !== H2_NO_ERROR) {
        if (!client.started) this.#fail('LB_ERR_UPSTREAM_RESET', [])
        else {
          this.tryFailed(false)
          cut()
        }
        return
      }
      end()
      if (!client.started) {
        // a Trailers-Only answer: the server's status rode on its headers
        ctx.status = ctx.status || 200
      }
      this.#host.finish(ctx)
      if (web !== 0) {
        // a browser cannot read trailers: they end the body as gRPC-Web's trailer frame
        if (trailers.length > 0) {
          const f = trailerFrame(trailers, web)
          client.body(f, 0, f.length)
        }
      } else client.sendTrailers?.(trailers)
      trailers = []
      client.end()
    })
    up.on('error', () => {
      if (this.#done) return
      this.tryFailed(!client.started && bytesIn === 0)
      if (client.started) cut()
      else this.#fail('LB_ERR_UPSTREAM_CONNECT', [])
    })
    up.on('close', () => {
      // reset by the server before anything came (RST_STREAM): UNAVAILABLE
      if (!this.#done && !client.started) this.#fail('LB_ERR_UPSTREAM_RESET', [])
      else if (!this.#done) cut()
    })
  }

  #fail (code: 'LB_ERR_UPSTREAM_TIMEOUT' | 'LB_ERR_UPSTREAM_CONNECT' | 'LB_ERR_UPSTREAM_RESET', grpcTrailers: readonly string[]): void {
    const ctx = this.#ctx
    const client = this.#client
    const wasDone = this.#done
    if (!wasDone) {
      this.#done = true
      if (this.#timer !== null) clearTimeout(this.#timer)
      this.releaseTry(0, 0)
    }
    if (client.aborted) return
    if (!client.started) {
      this.#host.error(ctx, client, code, {})
      return
    }
    // the response began: end it with the gRPC status as trailers
    if (grpcTrailers.length > 0) ctx.grpcStatus = Number(grpcTrailers[1])
    this.#host.finish(ctx)
    if (grpcTrailers.length > 0 && client.sendTrailers !== undefined) {
      client.sendTrailers(grpcTrailers)
      client.end()
    } else client.destroy()
  }
}
