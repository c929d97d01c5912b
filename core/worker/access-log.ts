// Access log: one JSON object per line per request (and per TCP session, as
// nginx's stream log), batched per worker and written with one write() per
// flush, so lines from different workers never interleave mid-line. Health
// probes are not logged (the caller skips them).
import { closeSync, openSync, writeSync } from 'node:fs'
import type { Ctx } from './request/context.js'

const FLUSH_MS = 100

export interface TcpSessionLog {
  client: string
  entrypoint: string
  status: number
  bytes_in: number
  bytes_out: number
  duration_ms: number
  service: string
  server: string
}
const FLUSH_BYTES = 64 * 1024

export class AccessLog {
  readonly enabled: boolean
  readonly #fd: number
  readonly #ownFd: boolean
  #buf = ''
  #timer: NodeJS.Timeout | null = null

  /** target: 'stdout', 'off' or a file path (opened for append). */
  constructor (target: string) {
    this.enabled = target !== 'off'
    this.#ownFd = this.enabled && target !== 'stdout'
    this.#fd = !this.enabled ? -1 : target === 'stdout' ? 1 : openSync(target, 'a')
  }

  write (ctx: Ctx, durationMs: number): void {
    this.#append({
      time: new Date().toISOString(),
      client: ctx.remoteAddress,
      entrypoint: ctx.entrypoint,
      method: ctx.method,
      path: ctx.query === '' ? ctx.path : `${ctx.path}?${ctx.query}`,
      host: ctx.host,
      status: ctx.status,
      bytes_in: ctx.bytesIn,
      bytes_out: ctx.bytesOut,
      duration_ms: durationMs,
      router: ctx.router,
      service: ctx.service,
      server: ctx.server,
      retries: ctx.retries === 0 ? undefined : ctx.retries,
      user: ctx.user === '' ? undefined : ctx.user,
      protocol: ctx.h2 ? 'HTTP/2.0' : undefined, // Traefik's RequestProtocol; absent: HTTP/1.1
    })
  }

  /**
   * One TCP session, when it ends. status as nginx's stream module: 200 the
   * session ran, 502 no server could be connected, 503 no server was usable.
   * bytes_in: received from the client; bytes_out: sent to it.
   */
  writeTcp (s: TcpSessionLog): void {
    this.#append({ time: new Date().toISOString(), protocol: 'tcp', ...s })
  }

  #append (line: object): void {
    this.#buf += JSON.stringify(line) + '\n'
    if (this.#buf.length >= FLUSH_BYTES) this.flush()
    else if (this.#timer === null) {
      this.#timer = setTimeout(() => this.flush(), FLUSH_MS)
      this.#timer.unref()
    }
  }

  flush (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    if (this.#buf === '') return
    const data = this.#buf
    this.#buf = ''
    try {
      writeSync(this.#fd, data)
    } catch {
      // a closed stdout or a full disk must not take the data plane down
    }
  }

  close (): void {
    this.flush()
    if (this.#ownFd) closeSync(this.#fd)
  }
}
