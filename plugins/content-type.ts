// contentType: Traefik v3's Content-Type detection. lb, as Traefik v3, leaves
// a response without Content-Type as it is; on a route with this middleware
// such a response gets the type its first bytes say (mime-sniff.ts: Go's
// http.DetectContentType, which Traefik lets Go's server apply). As Go's
// server: only when there is a body (not for HEAD, 1xx, 204, 304, or an empty
// body), only when the answer sets no Content-Type, and not when it has a
// Content-Encoding (the bytes are compressed: Go's HTTP/2 server does not sniff
// those either). The head waits for the first body bytes; the type is
// sniffed from them (at most 512 bytes), as Go sniffs its first write.
// `auto_detect` is deprecated in Traefik v3 and kept for its configs:
// false turns the middleware into a no-op, true is the same as leaving it out.
import {
  type Checker, type ClientResponse, type Ctx, type FilterHost, type Table, ClientFilter, NEXT, addClientFilter, definePlugin, findHeader,
} from 'lb/plugin'
import { sniff } from './mime-sniff.js'

export interface ContentTypeConf {
  /** Traefik's deprecated autoDetect, when it is set */
  readonly autoDetect?: boolean
}

function validate (c: Checker, t: Table, path: string): ContentTypeConf {
  c.table(t, path, ['auto_detect'])
  return t.auto_detect === undefined ? {} : { autoDetect: c.bool(t, 'auto_detect', path, true) }
}

interface Held { status: number, reason: string, headers: readonly string[], length: number }

class Sniffer extends ClientFilter {
  #held: Held | null = null

  override head (status: number, reason: string, headers: readonly string[], contentLength: number): void {
    if (this.ctx.method === 'HEAD' || status < 200 || status === 204 || status === 304 || contentLength === 0 ||
      findHeader(headers, 'content-type') >= 0 || encoded(headers)) {
      this.inner.head(status, reason, headers, contentLength)
      return
    }
    this.#held = { status, reason, headers, length: contentLength }
  }

  /** The held head goes out, with `type` when not ''. */
  #release (type: string): void {
    const h = this.#held
    if (h === null) return
    this.#held = null
    this.inner.head(h.status, h.reason, type === '' ? h.headers : [...h.headers, 'content-type', type], h.length)
  }

  override body (buf: Buffer, start: number, end: number): boolean {
    if (this.#held !== null && end > start) this.#release(sniff(buf, start, end))
    return this.inner.body(buf, start, end)
  }

  protected override trailersOut (headers: readonly string[]): void {
    this.#release('')
    this.inner.sendTrailers?.(headers)
  }

  override end (): void {
    this.#release('') // no body: nothing to sniff (Go sets no type either)
    this.inner.end()
  }
}

function encoded (headers: readonly string[]): boolean {
  const i = findHeader(headers, 'content-encoding')
  return i >= 0 && headers[i]!.trim() !== '' && headers[i]!.trim().toLowerCase() !== 'identity'
}

const filter = (inner: ClientResponse, ctx: Ctx, host: FilterHost): ClientResponse => new Sniffer(inner, ctx, host)

export default definePlugin<ContentTypeConf>({
  name: 'contentType',
  api: 1,
  validate,
  create (conf, env) {
    if (conf.autoDetect !== undefined) env.log.warn('auto_detect is deprecated (as in Traefik v3): the contentType middleware is only meant to enable Content-Type detection; remove the option')
    if (conf.autoDetect === false) return {} // Traefik: "Disable content-type detection (idempotent)"
    return {
      onRequest (ctx) {
        addClientFilter(ctx, filter)
        return NEXT
      },
    }
  },
})
