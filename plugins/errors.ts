// errors: Traefik's custom error pages. When what follows this middleware in
// the chain answers with a status in `status` (codes and ranges: "500",
// "500-599"; the service's answer, a later middleware's, or lb's own 502/503),
// the answer is dropped and a page is fetched from `service` instead: GET
// `query` ("/" when empty; {status}, {originalStatus} and {url} replaced),
// with the client's headers and Host (core/worker/proxy/page-fetch.ts). The
// client gets that page's headers and body with the caught status, or the
// status `status_rewrites` maps it to. When the error service fails, the
// client gets its failure's body (lb's error text) with that same status: as
// Traefik, whose codeModifier forces the status on whatever the error
// service's handler writes.
import {
  type Checker, type ClientResponse, type Ctx, type FilterHost, type Page, type Table, ClientFilter, NEXT, addClientFilter, definePlugin, join,
} from 'lb/plugin'

export interface ErrorsConf {
  /** statuses caught, as configured (Traefik's `status`) */
  readonly status: readonly string[]
  /** the service that serves the pages (checked to exist by core/config/load.ts) */
  readonly service: string
  /** the page's path and query template; '' = "/" */
  readonly query: string
  /** caught status (code or range) → the status the client gets (Traefik's statusRewrites) */
  readonly statusRewrites: Readonly<Record<string, number>>
}

const RANGE = /^\s*(\d{3})\s*(?:-\s*(\d{3})\s*)?$/

/** "500", "500-599", "404,418,500-599" as inclusive [from, to] pairs (Traefik's NewHTTPCodeRanges); null when malformed. */
export function codeRanges (spec: string): number[] | null {
  const out: number[] = []
  for (const part of spec.split(',')) {
    const m = RANGE.exec(part)
    if (m === null) return null
    const from = Number(m[1])
    const to = m[2] === undefined ? from : Number(m[2])
    if (from < 100 || to > 599 || to < from) return null
    out.push(from, to)
  }
  return out
}

function validate (c: Checker, t: Table, path: string): ErrorsConf {
  c.table(t, path, ['status', 'service', 'query', 'status_rewrites'])
  const status = c.strings(t, 'status', path, [])
  status.forEach((s, i) => { if (codeRanges(s) === null) c.problem(join(join(path, 'status'), i), 'a status code or range like "500" or "500-599"', s) })
  const service = c.string(t, 'service', path)
  const query = c.string(t, 'query', path, '')
  if (/[\s#]/.test(query)) c.problem(join(path, 'query'), 'a path and query without spaces or "#"', query)
  const rp = join(path, 'status_rewrites')
  const rw = c.table(t.status_rewrites, rp, null)
  const statusRewrites: Record<string, number> = {}
  for (const [from, to] of Object.entries(rw)) {
    if (codeRanges(from) === null) c.problem(join(rp, from), 'a status code or range like "418" or "502-504" as the key', from)
    const n = typeof to === 'string' && /^\d{3}$/.test(to) ? Number(to) : to
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 100 || n > 599) c.problem(join(rp, from), 'a status code from 100 to 599', to)
    else statusRewrites[from] = n
  }
  return { status, service, query, statusRewrites }
}

/** Go's url.QueryEscape: every byte but letters, digits and -_.~ as %XX, the space as "+". */
export function queryEscape (s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (ch) => '%' + ch.charCodeAt(0).toString(16).toUpperCase()).replaceAll('%20', '+')
}

interface Compiled {
  readonly catches: Int32Array
  /** [from, to, status, ...] */
  readonly rewrites: Int32Array
  readonly service: string
  readonly query: string
}

function inRanges (r: Int32Array, step: number, code: number): number {
  for (let i = 0; i < r.length; i += step) if (code >= r[i]! && code <= r[i + 1]!) return i
  return -1
}

class ErrorPage extends ClientFilter {
  readonly #c: Compiled
  /** the status the client gets; 0 until a status was caught */
  #code = 0
  #page: Page | null = null
  /** what followed this middleware has ended its (dropped) answer */
  #dropped = false
  #sent = false
  #cancel: (() => void) | null = null
  #abortCb: (() => void) | null = null

  constructor (inner: ClientResponse, ctx: Ctx, host: FilterHost, c: Compiled) {
    super(inner, ctx, host)
    this.#c = c
  }

  override onAbort (cb: () => void): void {
    this.#abortCb = cb
    this.inner.onAbort(() => this.#aborted())
  }

  #aborted (): void {
    const cancel = this.#cancel
    this.#cancel = null
    if (cancel !== null) cancel()
    const cb = this.#abortCb
    this.#abortCb = null
    if (cb !== null) cb()
  }

  /** the status of the page that replaces a caught answer of `status` */
  #rewrite (status: number): number {
    const rw = this.#c.rewrites
    const i = inRanges(rw, 3, status)
    return i < 0 ? status : rw[i + 2]!
  }

  override statusFor (status: number): number {
    return super.statusFor(this.#catches(status) ? this.#rewrite(status) : status)
  }

  #catches (status: number): boolean {
    return this.#code === 0 && inRanges(this.#c.catches, 2, status) >= 0
  }

  #catch (status: number): void {
    const code = this.#rewrite(status)
    this.#code = code
    const ctx = this.ctx
    ctx.status = code // counted and logged as the client gets it
    this.inner.onAbort(() => this.#aborted())
    const url = ctx.query === '' ? ctx.path : ctx.path + '?' + ctx.query
    const q = ('/' + this.#c.query.replace(/^\/+/, '')).replaceAll('{status}', String(code))
      .replaceAll('{originalStatus}', String(status)).replaceAll('{url}', queryEscape(url))
    const at = q.indexOf('?')
    this.#cancel = this.host.fetchPage(ctx, this.#c.service, at < 0 ? q : q.slice(0, at), at < 0 ? '' : q.slice(at + 1), (p) => {
      this.#cancel = null
      this.#page = p
      this.#flush()
    })
  }

  /** The page goes out once it is here and the dropped answer has ended. */
  #flush (): void {
    const p = this.#page
    if (!this.#dropped || p === null || this.#sent) return
    this.#sent = true
    const inner = this.inner
    if (inner.aborted) return
    const extra = this.ctx.responseHeaders
    inner.head(this.#code, '', extra === null ? p.headers : [...p.headers, ...extra], p.body.length)
    if (p.body.length > 0) inner.body(p.body, 0, p.body.length)
    inner.end()
  }

  #drop (): void {
    this.#dropped = true
    this.#flush()
  }

  override head (status: number, reason: string, headers: readonly string[], contentLength: number): void {
    if (this.#catches(status)) this.#catch(status)
    else this.inner.head(status, reason, headers, contentLength)
  }

  override body (buf: Buffer, start: number, end: number): boolean {
    return this.#code !== 0 || this.inner.body(buf, start, end)
  }

  override onDrain (cb: () => void): void { if (this.#code === 0) this.inner.onDrain(cb) }
  protected override trailersOut (headers: readonly string[]): void { if (this.#code === 0) this.inner.sendTrailers?.(headers) }

  override end (): void {
    if (this.#code !== 0) this.#drop()
    else this.inner.end()
  }

  override send (status: number, headers: readonly string[], body: string, close?: boolean): void {
    if (this.#code !== 0) {
      // lb's error for the caught answer failing midway (h2-proxy.ts answers so before the client saw a byte): the page replaces it all the same
      this.#drop()
      return
    }
    if (!this.#catches(status)) {
      this.inner.send(status, headers, body, close)
      return
    }
    this.#catch(status)
    this.#drop()
  }

  /** the answer was cut midway: the page is served all the same (it replaces that answer) */
  override destroy (): void {
    if (this.#code !== 0) this.#drop()
    else this.inner.destroy()
  }
}

export default definePlugin<ErrorsConf>({
  name: 'errors',
  api: 1,
  validate,
  create (conf) {
    const pairs = (list: readonly string[]): number[] => list.flatMap((s) => codeRanges(s) ?? [])
    const rewrites: number[] = []
    for (const [from, to] of Object.entries(conf.statusRewrites)) {
      const r = codeRanges(from) ?? []
      for (let i = 0; i < r.length; i += 2) rewrites.push(r[i]!, r[i + 1]!, to)
    }
    const c: Compiled = { catches: Int32Array.from(pairs(conf.status)), rewrites: Int32Array.from(rewrites), service: conf.service, query: conf.query }
    const filter = (inner: ClientResponse, ctx: Ctx, host: FilterHost): ClientResponse => new ErrorPage(inner, ctx, host, c)
    return {
      onRequest (ctx) {
        addClientFilter(ctx, filter)
        return NEXT
      },
    }
  },
})
