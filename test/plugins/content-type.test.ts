// contentType (Traefik v3): through the real balancer, a backend answers
// bodies without Content-Type. A route without the middleware passes them
// untyped (Traefik v3's default); with it they get the type Go's
// DetectContentType gives their first bytes, over HTTP/1.1 and HTTP/2; a type
// the backend set, an encoded body, an empty body and HEAD are left alone;
// auto_detect = false turns it off. The sniffer against Go's own test vectors.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, request, startBackend } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { sniff } from '../../plugins/mime-sniff.js'
import { h2request, lbCheck, oneMiddleware, problems } from './setup.js'

const b = (s: string): Buffer => Buffer.from(s, 'latin1')

describe('contentType: the sniffer (Go\'s net/http sniff_test.go cases)', () => {
  const cases: Array<[string, Buffer, string]> = [
    ['empty', b(''), 'text/plain; charset=utf-8'],
    ['binary', b('\x01\x02\x03'), 'application/octet-stream'],
    ['HTML document #1', b('<HtMl><bOdY>blah blah blah</body></html>'), 'text/html; charset=utf-8'],
    ['HTML document #2', b('<HTML></HTML>'), 'text/html; charset=utf-8'],
    ['HTML document #3 (leading whitespace)', b('   <!DOCTYPE HTML>...'), 'text/html; charset=utf-8'],
    ['HTML document #4 (leading CRLF)', b('\r\n<html>...'), 'text/html; charset=utf-8'],
    ['Plain text', Buffer.from('This is not HTML. It has ☃ though.'), 'text/plain; charset=utf-8'],
    ['XML', b('\n<?xml!'), 'text/xml; charset=utf-8'],
    ['Windows icon', b('\x00\x00\x01\x00'), 'image/x-icon'],
    ['BMP image', b('BM...'), 'image/bmp'],
    ['GIF 87a', b('GIF87a'), 'image/gif'],
    ['PNG image', b('\x89PNG\x0D\x0A\x1A\x0A'), 'image/png'],
    ['JPEG image', b('\xFF\xD8\xFF'), 'image/jpeg'],
    ['WEBP image', b('RIFF\x00\x00\x00\x00WEBPVP'), 'image/webp'],
    ['MP4 video', b('\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom<\x06t\xbfmdat'), 'video/mp4'],
    ['AVI video', b('RIFF,O\n\x00AVI LISTÀ'), 'video/avi'],
    ['WAV audio', b('RIFFb\xb8\x00\x00WAVEfmt \x12\x00\x00\x00\x06'), 'audio/wave'],
    ['MP3 with ID3', b('ID3\x03\x00\x00\x00\x00\x0f'), 'audio/mpeg'],
    ['woff2', b('wOF2\x00\x01\x00\x00'), 'font/woff2'],
    ['gzip', b('\x1F\x8B\x08'), 'application/x-gzip'],
    ['zip', b('PK\x03\x04'), 'application/zip'],
    ['wasm', b('\x00asm\x01\x00'), 'application/wasm'],
    ['PDF', b('%PDF-1.7'), 'application/pdf'],
    ['UTF-8 BOM', b('\xEF\xBB\xBFhello'), 'text/plain; charset=utf-8'],
    ['tag without a terminating byte', b('<HTMLX'), 'text/plain; charset=utf-8'],
  ]
  for (const [name, data, want] of cases) test(name, () => assert.equal(sniff(data), want))
  test('only the first 512 bytes count', () => assert.equal(sniff(Buffer.concat([b('a'.repeat(512)), b('\x00')])), 'text/plain; charset=utf-8'))
})

describe('contentType: config validation', () => {
  test('auto_detect is a boolean; no other key', () => {
    assert.match(problems(oneMiddleware('type = "contentType"\nauto_detect = "yes"')), /middlewares\.m\.auto_detect: expected true or false|middlewares\.m\.auto_detect: expected a boolean/)
    assert.match(problems(oneMiddleware('type = "contentType"\nautodetect = true')), /middlewares\.m\.autodetect/)
  })
})

const BODIES: Record<string, Buffer> = {
  html: b('<!DOCTYPE html><html><body>hi</body></html>'),
  png: b('\x89PNG\x0D\x0A\x1A\x0A\x00\x00\x00\x0DIHDR'),
  text: b('just words\n'),
  bin: b('\x00\x01\x02\x03'),
}

describe('contentType through the balancer', () => {
  let app: Backend, a: AdminLb
  let h2c = 0
  before(async () => {
    app = await startBackend('app', (req, res) => {
      const what = (req.url ?? '').split('/').pop()!
      if (what === 'typed') { res.writeHead(200, { 'content-type': 'application/json' }); res.end('<html></html>'); return }
      if (what === 'gz') { res.writeHead(200, { 'content-encoding': 'gzip' }); res.end(b('\x1F\x8B\x08\x00')); return }
      if (what === 'empty') { res.writeHead(200); res.end(); return }
      if (what === 'chunked') { res.writeHead(200); res.write(BODIES.html!); setTimeout(() => res.end('more'), 10); return }
      res.writeHead(200)
      res.end(BODIES[what] ?? b(''))
    })
    a = await startAdminLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.h2c]
address = "127.0.0.1:0"
protocol = "h2c"
[middlewares.autodetect]
type = "contentType"
[middlewares.off]
type = "contentType"
auto_detect = false
[routers.ct]
rule = "PathPrefix(\`/ct\`)"
service = "app"
middlewares = ["autodetect"]
[routers.off]
rule = "PathPrefix(\`/off\`)"
service = "app"
middlewares = ["off"]
[routers.plain]
rule = "PathPrefix(\`/\`)"
service = "app"
[services.app]
[[services.app.servers]]
address = "${app.address}"
check = false
`)
    h2c = await a.lb.portOf('h2c')
  })
  after(async () => { await a.lb.stop(); await app.close() })

  test('without the middleware, or with auto_detect = false, an untyped body stays untyped (Traefik v3)', async () => {
    for (const p of ['/plain/html', '/off/html']) {
      const r = await request(`${a.lb.url}${p}`)
      assert.equal(r.status, 200)
      assert.equal(r.headers['content-type'], undefined, p)
    }
  })

  test('with it, the type of the first bytes, and the body unchanged', async () => {
    const want: Record<string, string> = { html: 'text/html; charset=utf-8', png: 'image/png', text: 'text/plain; charset=utf-8', bin: 'application/octet-stream', chunked: 'text/html; charset=utf-8' }
    for (const [what, type] of Object.entries(want)) {
      const r = await request(`${a.lb.url}/ct/${what}`)
      assert.equal(r.headers['content-type'], type, what)
      if (what === 'text' || what === 'html') assert.equal(r.body, BODIES[what]!.toString('latin1'))
    }
  })

  test('a type set by the backend, an encoded body, an empty body and HEAD are left alone', async () => {
    assert.equal((await request(`${a.lb.url}/ct/typed`)).headers['content-type'], 'application/json')
    assert.equal((await request(`${a.lb.url}/ct/gz`)).headers['content-type'], undefined)
    assert.equal((await request(`${a.lb.url}/ct/empty`)).headers['content-type'], undefined)
    assert.equal((await request(`${a.lb.url}/ct/html`, { method: 'HEAD' })).headers['content-type'], undefined)
  })

  test('over HTTP/2 the same', async () => {
    const r = await h2request(`http://127.0.0.1:${h2c}`, '/ct/png')
    assert.equal(r.status, 200)
    assert.equal(r.headers['content-type'], 'image/png')
    assert.deepEqual(r.bytes, BODIES.png)
    assert.equal((await h2request(`http://127.0.0.1:${h2c}`, '/plain/png')).headers['content-type'], undefined)
  })

  test('the dashboard API shows it as Traefik\'s', async () => {
    const on = JSON.parse((await request(`${a.dash}/api/http/middlewares/autodetect@file`)).body) as Record<string, unknown>
    assert.deepEqual(on.contentType, {})
    assert.equal(on.type, 'contenttype')
    const off = JSON.parse((await request(`${a.dash}/api/http/middlewares/off@file`)).body) as Record<string, unknown>
    assert.deepEqual(off.contentType, { autoDetect: false })
  })
})

describe('contentType: Traefik\'s documented example ("Enable auto-detection")', () => {
  // [http.middlewares.autodetect.contentType], in lb's TOML
  const text = (backend: string): string => `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[middlewares.autodetect]
type = "contentType"
[routers.r]
rule = "PathPrefix(\`/\`)"
service = "app"
middlewares = ["autodetect"]
[services.app]
[[services.app.servers]]
address = "${backend}"
check = false
`
  let app: Backend, a: AdminLb
  before(async () => {
    app = await startBackend('app', (_req, res) => { res.writeHead(200); res.end('<html><body>hello</body></html>') })
    a = await startAdminLb(text(app.address))
  })
  after(async () => { await a.lb.stop(); await app.close() })

  test('lb check accepts it, and a response the backend left untyped gets its detected type', async () => {
    const r = lbCheck(text('127.0.0.1:9'))
    assert.equal(r.status, 0, r.out)
    assert.equal((await request(a.lb.url + '/')).headers['content-type'], 'text/html; charset=utf-8')
  })
})
