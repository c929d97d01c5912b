// Response header semantics, raw bytes both sides of a real
// 2-worker balancer: the headers a server's Connection names are not passed on;
// 204 and 304 get no Content-Length the server did not send (a 204 never);
// HEAD on a compressed route carries the fields GET does.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Lb, startLb } from '../helpers.js'
import { mwConfig } from '../plugins/setup.js'
import { type RawBackend, exchange, startRawBackend } from './raw-http.js'

const BODY = 'compressible text. '.repeat(200) // 3800 bytes, over compress's 1024-byte minimum

/** The backend's answer to each path. */
function answer (head: string): string {
  const path = head.slice(head.indexOf(' ') + 1, head.indexOf(' HTTP/'))
  switch (path.replace(/^\/z/, '')) {
    case '/204': return 'HTTP/1.1 204 No Content\r\nx-a: 1\r\n\r\n'
    case '/204-with-length': return 'HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n'
    case '/304': return 'HTTP/1.1 304 Not Modified\r\netag: "v1"\r\n\r\n'
    case '/304-with-length': return `HTTP/1.1 304 Not Modified\r\netag: "v1"\r\ncontent-length: ${BODY.length}\r\n\r\n`
    case '/hop': return 'HTTP/1.1 200 OK\r\nconnection: X-Secret, keep-alive\r\nx-secret: 1\r\nX-SECRET: 2\r\nx-kept: 3\r\n' +
      'connection: x-other\r\nx-other: 4\r\ncontent-length: 2\r\n\r\nok'
    case '/text': return `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\netag: "t1"\r\ncontent-length: ${BODY.length}\r\n\r\n` +
      (head.startsWith('HEAD ') ? '' : BODY)
    default: return 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'
  }
}

/** The header lines of a raw head, lower-cased names, without Date (it changes). */
function fields (head: string): string[] {
  return head.split('\r\n').slice(1).map((l) => l.replace(/^[^:]+/, (k) => k.toLowerCase())).filter((l) => !l.startsWith('date:')).sort()
}

describe('response headers', () => {
  let backend: RawBackend, lb: Lb

  before(async () => {
    backend = await startRawBackend(answer)
    lb = await startLb(mwConfig(backend.address, `
[middlewares.gz]
type = "compress"
encodings = ["gzip"]
`, { '/z': ['gz'], '/': [] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('headers named in the server\'s Connection are not passed on', async () => {
    const a = await exchange(lb.port, 'GET /hop HTTP/1.1\r\nhost: a\r\n\r\n')
    assert.equal(a.status, 200, a.text)
    const f = fields(a.responses[0]!.head)
    assert.ok(f.includes('x-kept: 3'), a.text)
    assert.ok(!f.some((l) => /^(x-secret|x-other|connection):/.test(l)), a.text)
  })

  test('204 and 304: no Content-Length unless the server sent one, never on 204; the connection stays usable', async () => {
    const get = (path: string): string => `GET ${path} HTTP/1.1\r\nhost: a\r\n\r\n`
    // one after the other on one connection: the answer after each must still be read right
    const a = await exchange(lb.port, [get('/204'), get('/next'), get('/304'), get('/next'), get('/204-with-length'),
      get('/304-with-length'), get('/next'), 'HEAD /text HTTP/1.1\r\nhost: a\r\n\r\n', get('/next'),
      'HEAD /health HTTP/1.1\r\nhost: a\r\n\r\n', get('/next')])
    const [r204, , r304, , r204cl, r304cl, , head, , local, last] = a.responses
    assert.equal(a.responses.length, 11, a.text)
    assert.equal(r204!.status, 204)
    assert.doesNotMatch(r204!.head, /content-length|transfer-encoding/i, a.text)
    assert.match(r204!.head, /\r\nx-a: 1/)
    assert.equal(r304!.status, 304)
    assert.doesNotMatch(r304!.head, /content-length|transfer-encoding/i, a.text)
    assert.match(r304!.head, /\r\netag: "v1"/)
    assert.doesNotMatch(r204cl!.head, /content-length/i, 'a 204 never carries Content-Length (RFC 9110 §8.6)')
    assert.match(r304cl!.head, new RegExp(`\\r\\nContent-Length: ${BODY.length}(\\r\\n|$)`, 'i'), 'a 304 keeps the server\'s length')
    // the same holds for HEAD, proxied or answered by lb (this uWS build closed the connection after a HEAD answer with a length)
    assert.match(head!.head, new RegExp(`\\r\\ncontent-length: ${BODY.length}(\\r\\n|$)`, 'i'))
    assert.match(local!.head, /\r\ncontent-length: 3(\r\n|$)/i, 'a HEAD lb answers itself')
    assert.ok(!a.closed)
    assert.equal(last!.status, 200)
    assert.equal(last!.body, 'ok')
  })

  test('HEAD on a compressed route carries the fields GET does: Vary, Content-Encoding, the weak ETag', async () => {
    const req = (method: string, enc: string): string => `${method} /z/text HTTP/1.1\r\nhost: a\r\naccept-encoding: ${enc}\r\n\r\n`
    const get = await exchange(lb.port, req('GET', 'gzip'), { ms: 3000 })
    const head = await exchange(lb.port, req('HEAD', 'gzip'))
    // GET's body is streamed chunked (its compressed length is not known in advance): the raw client reads the head only
    const getHead = get.text.slice(0, get.text.indexOf('\r\n\r\n'))
    assert.match(getHead, /\r\ncontent-encoding: gzip/i, get.text.slice(0, 400))
    const payload = (l: string): boolean => /^(content-length|transfer-encoding):/.test(l)
    assert.deepEqual(fields(head.responses[0]!.head).filter((l) => !payload(l)), fields(getHead).filter((l) => !payload(l)))
    assert.match(head.responses[0]!.head, /\r\nvary: Accept-Encoding/i)
    assert.match(head.responses[0]!.head, /\r\netag: W\/"t1"/i)
    assert.doesNotMatch(head.responses[0]!.head, /content-length/i, 'the GET has no Content-Length either')
    // without gzip accepted: identity both ways, Vary all the same
    const plain = await exchange(lb.port, req('HEAD', 'identity'))
    assert.match(plain.responses[0]!.head, /\r\nvary: Accept-Encoding/i)
    assert.doesNotMatch(plain.responses[0]!.head, /content-encoding/i)
    assert.match(plain.responses[0]!.head, new RegExp(`\\r\\ncontent-length: ${BODY.length}`, 'i'))
  })
})
