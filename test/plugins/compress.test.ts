// compress through the real balancer: encoding negotiation with q-values,
// what is skipped, Vary, and streamed bodies (known and unknown length, a slow
// client) that must decompress to exactly what the upstream sent.
import { strict as assert } from 'node:assert'
import { createHash, randomBytes } from 'node:crypto'
import http from 'node:http'
import { after, before, describe, test } from 'node:test'
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib'
import { type Backend, type Lb, startBackend, startLb } from '../helpers.js'
import { negotiate, quality } from '../../plugins/compress.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'

/** Compressible but not trivially so: hex of a hash chain (about 2:1 with gzip). */
function text (bytes: number, seed = 'lb'): Buffer {
  const out = Buffer.alloc(bytes)
  let h = createHash('sha256').update(seed).digest()
  for (let i = 0; i < bytes; i += 64) {
    out.write(h.toString('hex'), i, 'latin1')
    h = createHash('sha256').update(h).digest()
  }
  return out
}

// 16 MiB of base64 (about 3:4 with gzip): more than loopback socket buffers hold, so a client that stops
// reading makes the balancer's client side push back, and the transform must pause
const BIG = Buffer.from(randomBytes(12 * 1024 * 1024).toString('base64'), 'latin1')
const PAGE = text(4096)

interface Raw { status: number, headers: http.IncomingHttpHeaders, body: Buffer }

/** GET with raw (undecoded) body; `slow` stops reading for half a second after the first chunk (backpressure). */
function get (url: string, headers: Record<string, string> = {}, slow = false, method = 'GET'): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { agent: false, headers, method }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (d: Buffer) => {
        chunks.push(d)
        if (slow && chunks.length === 1) {
          res.pause()
          setTimeout(() => res.resume(), 500)
        }
      })
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

function decode (r: Raw): Buffer {
  switch (r.headers['content-encoding']) {
    case 'gzip': return gunzipSync(r.body)
    case 'br': return brotliDecompressSync(r.body)
    case undefined: return r.body
    default: throw new Error(`unexpected encoding ${r.headers['content-encoding']}`)
  }
}

describe('Accept-Encoding negotiation', () => {
  test('q-values, "*", ties to the server order, q=0 refuses', () => {
    assert.equal(quality('gzip;q=0.8, br', 'gzip'), 0.8)
    assert.equal(quality('GZIP ; Q=0.5', 'gzip'), 0.5)
    assert.equal(quality('deflate, *;q=0.2', 'br'), 0.2)
    assert.equal(quality('deflate', 'br'), 0)
    assert.equal(negotiate('gzip, br', ['br', 'gzip']), 'br')
    assert.equal(negotiate('gzip;q=1, br;q=0.5', ['br', 'gzip']), 'gzip')
    assert.equal(negotiate('br;q=0, gzip', ['br', 'gzip']), 'gzip')
    assert.equal(negotiate('*;q=0.1', ['br', 'gzip']), 'br')
    assert.equal(negotiate('*;q=0.5, br;q=0', ['br', 'gzip']), 'gzip')
    assert.equal(negotiate('identity', ['br', 'gzip']), null)
    assert.equal(negotiate('', ['br', 'gzip']), null)
  })

  test('config problems', () => {
    assert.match(problems(oneMiddleware('type = "compress"\nencodings = ["zstd"]')), /middlewares\.m\.encodings\[0\]: expected one of "br", "gzip", found "zstd"/)
    assert.match(problems(oneMiddleware('type = "compress"\nmin_response_body_bytes = -1')), /middlewares\.m\.min_response_body_bytes: expected an integer from 0 to 2147483647, found number -1/)
    assert.match(problems(oneMiddleware('type = "compress"\nexcluded_content_types = ["text"]')), /middlewares\.m\.excluded_content_types\[0\]: expected a media type like "text\/html" or "image\/\*", found "text"/)
    assert.match(problems(oneMiddleware('type = "compress"\nexcluded_content_types = []\nincluded_content_types = []')), /excluded_content_types and included_content_types exclude each other/)
  })
})

describe('compress through the balancer', () => {
  let backend: Backend, lb: Lb
  before(async () => {
    backend = await startBackend('web', (req, res) => {
      req.resume()
      const url = req.url!
      const send = (body: Buffer, headers: Record<string, string>): void => {
        res.writeHead(200, { 'content-length': String(body.length), ...headers })
        res.end(body)
      }
      if (url === '/page') send(PAGE, { 'content-type': 'text/html; charset=utf-8', etag: '"v1"', 'accept-ranges': 'bytes' })
      else if (url === '/small') send(PAGE.subarray(0, 1000), { 'content-type': 'text/plain' })
      else if (url === '/edge') send(PAGE.subarray(0, 1024), { 'content-type': 'text/plain' })
      else if (url === '/encoded') send(gzipSync(PAGE), { 'content-type': 'text/plain', 'content-encoding': 'gzip' })
      else if (url === '/png') send(PAGE, { 'content-type': 'image/png' })
      else if (url === '/svg') send(PAGE, { 'content-type': 'image/svg+xml' })
      else if (url === '/vary') send(PAGE, { 'content-type': 'text/plain', vary: 'Origin' })
      else if (url === '/no-transform') send(PAGE, { 'content-type': 'text/plain', 'cache-control': 'public, no-transform' })
      else if (url === '/empty') { res.writeHead(204); res.end() } else if (url === '/big' || url === '/big-chunked') {
        // written with backpressure, in 64 KiB pieces; chunked when no length is declared
        res.writeHead(200, url === '/big' ? { 'content-type': 'text/plain', 'content-length': String(BIG.length) } : { 'content-type': 'text/plain' })
        let off = 0
        const pump = (): void => {
          while (off < BIG.length) {
            const piece = BIG.subarray(off, off + 65536)
            off += piece.length
            if (!res.write(piece)) {
              res.once('drain', pump)
              return
            }
          }
          res.end()
        }
        pump()
      } else send(PAGE, { 'content-type': 'text/plain' })
    })
    lb = await startLb(mwConfig(backend.address, `
[middlewares.compress]
type = "compress"
`, { '/': ['compress'] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('gzip or brotli as the client prefers; Vary, weak ETag, no Content-Length or Accept-Ranges', async () => {
    for (const [accept, enc] of [['gzip', 'gzip'], ['br;q=1.0, gzip;q=0.5', 'br'], ['gzip;q=1, br;q=0.5', 'gzip'], ['br;q=0, gzip', 'gzip'], ['*', 'br']]) {
      const r = await get(`${lb.url}/page`, { 'accept-encoding': accept! })
      assert.equal(r.headers['content-encoding'], enc, accept)
      assert.equal(r.headers.vary, 'Accept-Encoding')
      assert.equal(r.headers['content-length'], undefined)
      assert.equal(r.headers['transfer-encoding'], 'chunked')
      assert.equal(r.headers.etag, 'W/"v1"')
      assert.equal(r.headers['accept-ranges'], undefined)
      assert.ok(r.body.length < PAGE.length * 0.7)
      assert.deepEqual(decode(r), PAGE)
    }
  })

  test('not compressed: no acceptable encoding (but Vary says it could be), under 1024 bytes, already encoded, incompressible, no-transform, no body (HEAD is decided as GET)', async () => {
    for (const accept of ['', 'identity', 'deflate', 'gzip;q=0, br;q=0']) {
      const r = await get(`${lb.url}/page`, accept === '' ? {} : { 'accept-encoding': accept })
      assert.equal(r.headers['content-encoding'], undefined, accept)
      assert.equal(r.headers.vary, 'Accept-Encoding')
      assert.equal(r.headers['content-length'], String(PAGE.length))
      assert.deepEqual(r.body, PAGE)
    }
    const small = await get(`${lb.url}/small`, { 'accept-encoding': 'gzip' })
    assert.equal(small.headers['content-encoding'], undefined)
    assert.equal(small.headers.vary, undefined)
    assert.equal((await get(`${lb.url}/edge`, { 'accept-encoding': 'gzip' })).headers['content-encoding'], 'gzip', 'exactly 1024 bytes is compressed')
    const encoded = await get(`${lb.url}/encoded`, { 'accept-encoding': 'br' })
    assert.equal(encoded.headers['content-encoding'], 'gzip')
    assert.deepEqual(gunzipSync(encoded.body), PAGE)
    assert.equal((await get(`${lb.url}/png`, { 'accept-encoding': 'gzip' })).headers['content-encoding'], undefined)
    assert.equal((await get(`${lb.url}/svg`, { 'accept-encoding': 'gzip' })).headers['content-encoding'], 'gzip')
    assert.equal((await get(`${lb.url}/no-transform`, { 'accept-encoding': 'gzip' })).headers['content-encoding'], undefined)
    // HEAD carries the fields GET would (test/e2e/response-headers.test.ts), without a body
    const head = await get(`${lb.url}/page`, { 'accept-encoding': 'gzip' }, false, 'HEAD')
    assert.equal(head.headers['content-encoding'], 'gzip')
    assert.equal(head.headers.vary, 'Accept-Encoding')
    assert.equal(head.body.length, 0)
    assert.equal((await get(`${lb.url}/empty`, { 'accept-encoding': 'gzip' })).status, 204)
  })

  test('an existing Vary keeps its values', async () => {
    assert.equal((await get(`${lb.url}/vary`, { 'accept-encoding': 'gzip' })).headers.vary, 'Origin, Accept-Encoding')
  })

  test('16 MiB bodies stream through, known length or chunked, to slow and fast clients: byte-exact after decoding', async () => {
    const want = createHash('sha256').update(BIG).digest('hex')
    for (const [path, accept, slow] of [['/big', 'gzip', true], ['/big-chunked', 'br', true], ['/big-chunked', 'gzip', false]] as const) {
      const r = await get(`${lb.url}${path}`, { 'accept-encoding': accept }, slow)
      assert.equal(r.status, 200)
      assert.equal(r.headers['content-encoding'], accept, path)
      assert.equal(createHash('sha256').update(decode(r)).digest('hex'), want, `${path} ${accept}`)
    }
    assert.doesNotMatch(lb.log(), /"level":"error"/)
  })
})
