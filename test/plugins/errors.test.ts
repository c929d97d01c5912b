// errors (Traefik's custom error pages) through the real balancer: a backend
// that answers 500, 418 and 200, an error-page service that says which path
// and Host it was asked for, and a route whose only server refuses
// connections (lb's own 502). The page comes with the caught status (or its
// rewrite), over HTTP/1.1 and HTTP/2 alike; other statuses pass untouched; an
// error service that fails gives its failure's body with the caught status.
// The dashboard API shows the middleware as Traefik's does.
import { strict as assert } from 'node:assert'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Backend, freePort, request, startBackend, waitFor } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { h2request, lbCheck, oneMiddleware, problems } from './setup.js'

describe('errors: config validation', () => {
  test('status codes and ranges, a known service, rewrites to a status', () => {
    assert.match(problems(oneMiddleware('type = "errors"\nservice = "web"\nstatus = ["5xx"]')), /middlewares\.m\.status\[0\]: expected a status code or range like "500" or "500-599", found "5xx"/)
    assert.match(problems(oneMiddleware('type = "errors"\nservice = "nope"\nstatus = ["500"]')), /middlewares\.m\.service: unknown service "nope"/)
    assert.match(problems(oneMiddleware('type = "errors"\nstatus = ["500"]')), /middlewares\.m\.service: expected a string/)
    assert.match(problems(oneMiddleware('type = "errors"\nservice = "web"\n[middlewares.m.status_rewrites]\n"418" = 999')), /middlewares\.m\.status_rewrites\.418: expected a status code from 100 to 599, found number 999/)
  })
})

describe('errors through the balancer', () => {
  let app: Backend, pages: Backend, a: AdminLb
  let h2c = 0
  before(async () => {
    app = await startBackend('app', (req, res) => {
      const code = Number(/^\/(?:[a-z]\/)?(\d{3})/.exec(req.url ?? '')?.[1] ?? 200)
      res.writeHead(code, { 'content-type': 'text/plain', 'x-app': 'yes' })
      res.end(`app says ${code}\n`)
    })
    pages = await startBackend('pages', (req, res) => {
      if (req.url?.startsWith('/broken')) { req.socket.destroy(); return }
      if (req.url?.startsWith('/huge')) { res.end(Buffer.alloc(2 * 1024 * 1024, 0x61)); return }
      res.writeHead(200, { 'content-type': 'text/html', 'x-page': 'yes' })
      res.end(`<p>page ${req.url} for ${req.headers.host} (${req.method}, ${req.headers['x-client'] ?? '-'})</p>`)
    })
    const dead = await freePort()
    a = await startAdminLb(`[global]
access_log = "{{DIR}}/access.log"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.h2c]
address = "127.0.0.1:0"
protocol = "h2c"

[middlewares.oops]
type = "errors"
status = ["500", "501", "502", "503", "505-599", "418"]
service = "pages"
query = "/{status}.html?was={originalStatus}&url={url}"
[middlewares.oops.status_rewrites]
"418" = 404
"502-504" = 500
[middlewares.huge]
type = "errors"
status = ["500"]
service = "pages"
query = "/huge"
[middlewares.denied]
type = "errors"
status = ["401"]
service = "pages"
[middlewares.auth]
type = "basicAuth"
users = ["ann:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="]
[middlewares.broken]
type = "errors"
status = ["500-599"]
service = "pages"
query = "/broken"

[routers.app]
rule = "PathPrefix(\`/\`)"
service = "app"
middlewares = ["oops"]
[routers.down]
rule = "PathPrefix(\`/down\`)"
service = "down"
middlewares = ["oops"]
[routers.huge]
rule = "PathPrefix(\`/y\`)"
service = "app"
middlewares = ["huge"]
[routers.guarded]
rule = "PathPrefix(\`/guarded\`)"
service = "app"
middlewares = ["denied", "auth"]
[routers.unguarded]
rule = "PathPrefix(\`/unguarded\`)"
service = "app"
middlewares = ["auth", "denied"]
[routers.broken]
rule = "PathPrefix(\`/x\`)"
service = "app"
middlewares = ["broken"]
[services.app]
[[services.app.servers]]
address = "${app.address}"
check = false
[services.pages]
[[services.pages.servers]]
address = "${pages.address}"
check = false
[services.down]
retries = 0
[[services.down.servers]]
address = "127.0.0.1:${dead}"
check = false
max_fails = 0
`)
    h2c = await a.lb.portOf('h2c')
  })
  after(async () => { await a.lb.stop(); await app.close(); await pages.close() })

  test('a caught status: the page from the error service, with that status, the client\'s Host and headers, GET', async () => {
    const r = await request(`${a.lb.url}/500?q=1`, { method: 'POST', body: 'data', headers: { 'x-client': 'c1', host: 'shop.example' } })
    assert.equal(r.status, 500)
    assert.equal(r.body, '<p>page /500.html?was=500&url=%2F500%3Fq%3D1 for shop.example (GET, c1)</p>')
    assert.equal(r.headers['x-page'], 'yes')
    assert.equal(r.headers['x-app'], undefined, 'the dropped answer\'s headers are gone')
    assert.equal(r.headers['content-type'], 'text/html')
  })

  test('status_rewrites: 418 is answered as 404, {status} the new one and {originalStatus} the old', async () => {
    const r = await request(`${a.lb.url}/418`)
    assert.equal(r.status, 404)
    assert.match(r.body, /page \/404\.html\?was=418&/)
  })

  test('a status not caught passes untouched', async () => {
    for (const path of ['/200', '/404', '/504']) {
      const r = await request(`${a.lb.url}${path}`)
      assert.equal(r.status, Number(path.slice(1)))
      assert.equal(r.body, `app says ${path.slice(1)}\n`)
      assert.equal(r.headers['x-app'], 'yes')
    }
  })

  test('lb\'s own 502 (no server answers) is caught too, and rewritten as configured', async () => {
    const r = await request(`${a.lb.url}/down`)
    assert.equal(r.status, 500)
    assert.match(r.body, /page \/500\.html\?was=502&url=%2Fdown for /)
    // counted and logged as the client got it (written in the background: wait for the line)
    const line = await waitFor(() => readFileSync(join(a.lb.dir, 'access.log'), 'utf8').split('\n').find((l) => l.includes('"/down"')), 'the access log line')
    assert.match(line, /"status":500\b/)
  })

  test('a later middleware\'s answer is caught (basicAuth\'s 401); one before it in the chain is not', async () => {
    const r = await request(`${a.lb.url}/guarded`)
    assert.equal(r.status, 401)
    assert.match(r.body, /^<p>page \/ for /, 'query "" asks for "/"')
    const before = await request(`${a.lb.url}/unguarded`)
    assert.equal(before.status, 401)
    assert.doesNotMatch(before.body, /page/)
    const d = JSON.parse((await request(`${a.dash}/api/http/middlewares/denied@file`)).body) as Record<string, unknown>
    assert.deepEqual(d.errors, { status: ['401'], service: 'pages' }, 'what is not set is not shown (omitempty)')
  })

  test('over HTTP/2 the same', async () => {
    const r = await h2request(`http://127.0.0.1:${h2c}`, '/501')
    assert.equal(r.status, 501)
    assert.match(r.body, /page \/501\.html\?was=501&/)
    assert.equal(r.headers['x-page'], 'yes')
  })

  test('an error service that fails: its failure\'s body (lb\'s error text) with the caught status', async () => {
    const r = await request(`${a.lb.url}/x/500`)
    assert.equal(r.status, 500)
    assert.equal(r.body, 'upstream server closed the connection\n')
  })

  test('a page longer than 1 MiB counts as the error service failing', async () => {
    const r = await request(`${a.lb.url}/y/500`)
    assert.equal(r.status, 500)
    assert.match(r.body, /^upstream server sent an invalid response/)
  })

  test('the dashboard API shows it as Traefik\'s', async () => {
    const mw = JSON.parse((await request(`${a.dash}/api/http/middlewares/oops@file`)).body) as Record<string, unknown>
    assert.deepEqual(mw.errors, { status: ['500', '501', '502', '503', '505-599', '418'], service: 'pages', query: '/{status}.html?was={originalStatus}&url={url}', statusRewrites: { 418: 404, '502-504': 500 } })
    assert.equal(mw.type, 'errors')
    assert.equal(mw.status, 'enabled')
  })
})

// Traefik's documented example ("Custom Error Page for 5XX Status Code excluding 502 and 504"), in lb's TOML
const DOC_EXAMPLE = `[middlewares.test-errors]
type = "errors"
status = ["500","501","503","505-599"]
service = "error-handler-service"
query = "/{status}.html"
[middlewares.test-errors.status_rewrites]
"418" = "404"
"502-504" = "500"
`

describe('errors: Traefik\'s documented example', () => {
  let app: Backend, pages: Backend, a: AdminLb
  const routes = (appAddr: string, pagesAddr: string): string => `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
${DOC_EXAMPLE}
[routers.app]
rule = "PathPrefix(\`/\`)"
service = "app"
middlewares = ["test-errors"]
[services.app]
[[services.app.servers]]
address = "${appAddr}"
check = false
[services.error-handler-service]
[[services.error-handler-service.servers]]
address = "${pagesAddr}"
check = false
`
  before(async () => {
    app = await startBackend('app', (req, res) => { res.writeHead(Number(req.url!.slice(1))); res.end(`app ${req.url}`) })
    pages = await startBackend('pages', (req, res) => res.end(`page ${req.url}`))
    a = await startAdminLb(routes(app.address, pages.address))
  })
  after(async () => { await a.lb.stop(); await app.close(); await pages.close() })

  test('lb check accepts it', () => {
    const r = lbCheck(routes('127.0.0.1:9', '127.0.0.1:9'))
    assert.equal(r.status, 0, r.out)
  })

  test('5XX get the page, 503 as 500; 502 and 504 (and 418, not caught) pass as they are', async () => {
    for (const [path, status, body] of [['/500', 500, 'page /500.html'], ['/599', 599, 'page /599.html'], ['/503', 500, 'page /500.html'],
      ['/502', 502, 'app /502'], ['/504', 504, 'app /504'], ['/418', 418, 'app /418']] as const) {
      const r = await request(`${a.lb.url}${path}`)
      assert.equal(r.status, status, path)
      assert.equal(r.body, body, path)
    }
  })
})
