// compress: gzip or brotli response bodies (node:zlib), streamed through the
// proxy's body transform (core/worker/proxy/proxy.ts) with backpressure both ways.
// As Traefik's compress middleware: only bodies of at least
// `min_response_body_bytes` (default 1024, the seed's), only when the client's
// Accept-Encoding allows an encoding (q-values honoured; ties go to the order
// of `encodings`), never for bodies that are already encoded, ranged, marked
// no-transform, or of an incompressible type. Bodies of known length up to
// ONE_SHOT_MAX are compressed in one call once complete (cheapest); larger
// ones stream through zlib; bodies of unknown length (chunked, streamed) get a
// sync flush per upstream chunk, so a stream reaches the client as produced.
import { Transform, type TransformCallback } from 'node:stream'
import { brotliCompressSync, constants, createBrotliCompress, createGzip, gzipSync } from 'node:zlib'
import { type Checker, type ResponseHead, type Table, definePlugin, findHeader, join, removeHeader } from 'lb/plugin'

export const ENCODINGS = ['br', 'gzip'] as const
export type Encoding = typeof ENCODINGS[number]

/** Types that do not shrink (already compressed media and archives) or must not wait (event streams, gRPC). */
export const INCOMPRESSIBLE: readonly string[] = [
  'image/*', 'video/*', 'audio/*', 'font/woff', 'font/woff2',
  'application/zip', 'application/gzip', 'application/x-gzip', 'application/x-bzip2', 'application/x-xz',
  'application/zstd', 'application/x-7z-compressed', 'application/x-rar-compressed', 'application/octet-stream',
  'application/pdf', 'text/event-stream', 'application/grpc',
]
/** image/* is incompressible except these text formats */
const COMPRESSIBLE_IMAGES = ['image/svg+xml', 'image/x-icon', 'image/bmp']

export interface CompressConf {
  /** server preference among equally acceptable encodings. Default: ["br", "gzip"] */
  readonly encodings: readonly Encoding[]
  /** smaller bodies (by Content-Length) go uncompressed. Default: 1024 (seed) */
  readonly minBytes: number
  /** media types not compressed ("type/*" wildcards). Default: INCOMPRESSIBLE */
  readonly excluded: readonly string[]
  /** when not empty, only these media types are compressed. Default: [] */
  readonly included: readonly string[]
  /** gzip level 1..9. Default: 6 (zlib's and Traefik's default) */
  readonly gzipLevel: number
  /** brotli quality 0..11. Default: 4 (11, brotli's own default, costs ~20× more CPU for a few % smaller bodies) */
  readonly brotliQuality: number
}

const MEDIA_TYPE = /^[a-z0-9!#$&^_.+-]+\/(?:\*|[a-z0-9!#$&^_.+-]+)$/

function checkTypes (c: Checker, t: Table, key: string, path: string, def: readonly string[]): string[] {
  const list = c.strings(t, key, path, def).map((s) => s.toLowerCase())
  list.forEach((s, i) => { if (!MEDIA_TYPE.test(s)) c.problem(join(join(path, key), i), 'a media type like "text/html" or "image/*"', s) })
  return list
}

function validate (c: Checker, t: Table, path: string): CompressConf {
  c.table(t, path, ['encodings', 'min_response_body_bytes', 'excluded_content_types', 'included_content_types', 'gzip_level', 'brotli_quality'])
  const encodings = c.strings(t, 'encodings', path, ENCODINGS)
  encodings.forEach((e, i) => {
    if (!(ENCODINGS as readonly string[]).includes(e)) c.problem(join(join(path, 'encodings'), i), 'one of "br", "gzip"', e)
  })
  if (encodings.length === 0) c.problem(join(path, 'encodings'), 'at least one encoding', t.encodings)
  if (t.excluded_content_types !== undefined && t.included_content_types !== undefined) {
    c.problems.push(`${path}: excluded_content_types and included_content_types exclude each other (set one)`)
  }
  return {
    encodings: encodings.filter((e): e is Encoding => (ENCODINGS as readonly string[]).includes(e)),
    minBytes: c.int(t, 'min_response_body_bytes', path, 1024, 0, 2 ** 31 - 1),
    excluded: checkTypes(c, t, 'excluded_content_types', path, INCOMPRESSIBLE),
    included: checkTypes(c, t, 'included_content_types', path, []),
    gzipLevel: c.int(t, 'gzip_level', path, 6, 1, 9),
    brotliQuality: c.int(t, 'brotli_quality', path, 4, 0, 11),
  }
}

/**
 * The q-value (0..1) the Accept-Encoding header gives `token` (lower-case):
 * its own entry, else the "*" entry, else 0 (RFC 9110 §12.5.3). Scans the
 * header in place, allocating nothing.
 */
export function quality (h: string, token: string): number {
  const n = h.length
  let star = -1
  let i = 0
  while (i < n) {
    let c = h.charCodeAt(i)
    if (c === 44 || c === 32 || c === 9) { i++; continue }
    const start = i
    while (i < n && (c = h.charCodeAt(i)) !== 44 && c !== 59 && c !== 32 && c !== 9) i++
    const end = i
    let q = 1
    while (i < n && (c = h.charCodeAt(i)) !== 44) {
      if (c === 59) {
        i++
        while (i < n && (h.charCodeAt(i) === 32 || h.charCodeAt(i) === 9)) i++
        if (i + 1 < n && (h.charCodeAt(i) | 0x20) === 113 && h.charCodeAt(i + 1) === 61) { // q=
          i += 2
          q = 0
          let scale = 0
          while (i < n) {
            c = h.charCodeAt(i)
            if (c >= 48 && c <= 57) {
              if (scale === 0) q = q * 10 + c - 48
              else { q += (c - 48) / scale; scale *= 10 }
            } else if (c === 46 && scale === 0) scale = 10
            else break
            i++
          }
          if (q > 1) q = 1
        }
      } else i++
    }
    if (end - start === token.length && sameToken(h, start, token)) return q
    if (end - start === 1 && h.charCodeAt(start) === 42) star = q
  }
  return star < 0 ? 0 : star
}

function sameToken (h: string, at: number, token: string): boolean {
  for (let j = 0; j < token.length; j++) if ((h.charCodeAt(at + j) | 0x20) !== token.charCodeAt(j)) return false
  return true
}

/** The encoding to use for this Accept-Encoding, or null: highest q above 0, ties to the server's order. */
export function negotiate (accept: string, encodings: readonly Encoding[]): Encoding | null {
  if (accept === '') return null
  let best: Encoding | null = null
  let bestQ = 0
  for (let i = 0; i < encodings.length; i++) {
    const q = quality(accept, encodings[i]!)
    if (q > bestQ) {
      best = encodings[i]!
      bestQ = q
    }
  }
  return best
}

/** Media type of a Content-Type value, lower-case, without parameters. */
function mediaType (v: string): string {
  const semi = v.indexOf(';')
  return (semi < 0 ? v : v.slice(0, semi)).trim().toLowerCase()
}

/** A media-type list compiled for matching: exact types, and "type/" prefixes of "type/*" entries. */
interface TypeList { readonly exact: ReadonlySet<string>, readonly prefixes: readonly string[], readonly size: number }

function compileTypes (list: readonly string[]): TypeList {
  return {
    exact: new Set(list.filter((e) => !e.endsWith('/*'))),
    prefixes: list.filter((e) => e.endsWith('/*')).map((e) => e.slice(0, -1)),
    size: list.length,
  }
}

function listed (list: TypeList, type: string): boolean {
  if (list.exact.has(type)) return true
  for (let i = 0; i < list.prefixes.length; i++) {
    const p = list.prefixes[i]!
    if (type.startsWith(p)) return !(p === 'image/' && COMPRESSIBLE_IMAGES.includes(type))
  }
  return false
}

/**
 * Bodies of known length up to this are compressed in one synchronous zlib
 * call when they are complete. A zlib stream per response costs several times
 * the compression itself (thread-pool round trips per write, a full-size
 * window allocated per stream); one call with a window sized to the body does
 * not. At 64 KiB that call takes well under a millisecond (gzip 6, brotli 4).
 */
export const ONE_SHOT_MAX = 64 * 1024

/** log2 of the smallest window holding `bytes`, within zlib's or brotli's bounds. */
function windowBits (bytes: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, Math.ceil(Math.log2(Math.max(1, bytes)))))
}

/** Collects a body of known length (copies), compresses it once at the end. */
export class OneShot extends Transform {
  readonly #chunks: Buffer[] = []
  readonly #encoding: Encoding
  readonly #length: number
  readonly #gzipLevel: number
  readonly #brotliQuality: number

  constructor (encoding: Encoding, length: number, gzipLevel: number, brotliQuality: number) {
    super()
    this.#encoding = encoding
    this.#length = length
    this.#gzipLevel = gzipLevel
    this.#brotliQuality = brotliQuality
  }

  override _transform (chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#chunks.push(chunk)
    cb()
  }

  override _flush (cb: TransformCallback): void {
    const body = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks)
    this.#chunks.length = 0
    try {
      cb(null, this.#encoding === 'gzip'
        ? gzipSync(body, { level: this.#gzipLevel, windowBits: windowBits(this.#length, 9, 15) })
        : brotliCompressSync(body, {
          params: {
            [constants.BROTLI_PARAM_QUALITY]: this.#brotliQuality,
            [constants.BROTLI_PARAM_SIZE_HINT]: this.#length,
            [constants.BROTLI_PARAM_LGWIN]: windowBits(this.#length, 10, 24),
          },
        }))
    } catch (err) {
      cb(err as Error)
    }
  }
}

/**
 * A zlib stream, for large bodies and bodies of unknown length. Unknown
 * length is likely a stream (server-sent data, NDJSON), so each upstream chunk
 * is flushed through at once; a known length lets zlib fill its blocks.
 */
function streamingTransform (enc: Encoding, length: number, gzipLevel: number, brotliQuality: number): Transform {
  const streaming = length < 0
  if (enc === 'gzip') return createGzip({ level: gzipLevel, flush: streaming ? constants.Z_SYNC_FLUSH : constants.Z_NO_FLUSH })
  const params: Record<number, number> = { [constants.BROTLI_PARAM_QUALITY]: brotliQuality }
  if (!streaming) params[constants.BROTLI_PARAM_SIZE_HINT] = length
  return createBrotliCompress({ params, flush: streaming ? constants.BROTLI_OPERATION_FLUSH : constants.BROTLI_OPERATION_PROCESS })
}

/** Adds Accept-Encoding to Vary (unless it is there, or Vary is "*"). */
function addVary (headers: string[]): void {
  const i = findHeader(headers, 'vary')
  if (i < 0) {
    headers.push('vary', 'Accept-Encoding')
    return
  }
  const v = headers[i]!
  if (v.trim() === '*' || /(?:^|,)\s*accept-encoding\s*(?:,|$)/i.test(v)) return
  headers[i] = v === '' ? 'Accept-Encoding' : v + ', Accept-Encoding'
}

export default definePlugin<CompressConf>({
  name: 'compress',
  api: 1,
  validate,
  create (conf) {
    const { encodings, minBytes, gzipLevel, brotliQuality } = conf
    const excluded = compileTypes(conf.excluded)
    const included = compileTypes(conf.included)
    // HEAD is decided as GET would be (same Vary, same Content-Encoding); its transform is never run
    const eligible = (head: ResponseHead, isHead: boolean): boolean => {
      if ((head.noBody && !isHead) || head.status < 200 || head.status === 204 || head.status === 206 || head.status === 304) return false
      if (head.contentLength >= 0 && head.contentLength < minBytes) return false
      const h = head.headers
      const ce = findHeader(h, 'content-encoding')
      if (ce >= 0 && h[ce]!.trim().toLowerCase() !== 'identity') return false
      const cc = findHeader(h, 'cache-control')
      if (cc >= 0 && /no-transform/i.test(h[cc]!)) return false
      if (findHeader(h, 'content-range') >= 0) return false
      const ct = findHeader(h, 'content-type')
      if (ct < 0) return included.size === 0
      const type = mediaType(h[ct]!)
      return included.size > 0 ? listed(included, type) : !listed(excluded, type)
    }
    return {
      onResponse (ctx, head) {
        if (!eligible(head, ctx.method === 'HEAD')) return
        // a cache must know the body depends on Accept-Encoding, whichever this client sent
        addVary(head.headers)
        const enc = negotiate(ctx.header('accept-encoding'), encodings)
        if (enc === null) return
        const h = head.headers
        removeHeader(h, 'content-encoding')
        removeHeader(h, 'accept-ranges')
        const etag = findHeader(h, 'etag')
        if (etag >= 0 && h[etag]!.startsWith('"')) h[etag] = 'W/' + h[etag]! // the bytes differ now (as nginx gzip)
        h.push('content-encoding', enc)
        // (a HEAD's transform is never run: the cheapest kind, no zlib stream)
        head.transform = head.noBody || (head.contentLength >= 0 && head.contentLength <= ONE_SHOT_MAX)
          ? new OneShot(enc, head.contentLength, gzipLevel, brotliQuality)
          : streamingTransform(enc, head.contentLength, gzipLevel, brotliQuality)
      },
    }
  },
})
