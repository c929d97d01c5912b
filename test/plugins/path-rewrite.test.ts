// The path middlewares (stripPrefix, addPrefix, replacePath) through the real
// balancer: what the backend gets, what the access log says, the headers
// Traefik sets, the dashboard API's view, and that no rewrite yields a path
// lb would refuse from a client (dot segments, encoded slashes).
import { strict as assert } from 'node:assert'
import { readFileSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { type Backend, request, startBackend } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'

describe('path middlewares: config validation', () => {
  test('stripPrefix: prefixes must be paths, and at least one', () => {
    assert.match(problems(oneMiddleware('type = "stripPrefix"\nprefixes = ["/ok", "app"]')), /middlewares\.m\.prefixes\[1\]: expected a path prefix \(starting with "\/".*found "app"/)
    assert.match(problems(oneMiddleware('type = "stripPrefix"\nprefixes = ["/a b"]')), /middlewares\.m\.prefixes\[0\]: expected a path prefix/)
    assert.match(problems(oneMiddleware('type = "stripPrefix"\nprefixes = []')), /middlewares\.m\.prefixes: expected at least one prefix/)
    assert.match(problems(oneMiddleware('type = "stripPrefix"\nprefix = "/a"')), /middlewares\.m\.prefix: unknown key \(allowed: prefixes\)/)
  })
  test('addPrefix and replacePath: their one path is required and checked', () => {
    assert.match(problems(oneMiddleware('type = "addPrefix"')), /middlewares\.m\.prefix: expected a string \(required\)/)
    assert.match(problems(oneMiddleware('type = "addPrefix"\nprefix = "/v1?x"')), /middlewares\.m\.prefix: expected a path prefix/)
    assert.match(problems(oneMiddleware('type = "replacePath"\npath = 3')), /middlewares\.m\.path: expected a string, found number 3/)
    assert.match(problems(oneMiddleware('type = "replacePath"\npath = "x#y"')), /middlewares\.m\.path: expected a path/)
  })
})

describe('path middlewares through the balancer', () => {
  let backend: Backend, a: AdminLb
  const url = (): string => a.lb.url
  // the raw request target: node:http would resolve dot segments of a URL itself
  const get = (path: string, headers: Record<string, string> = {}): ReturnType<typeof request> => request(url(), { path, headers })
  const last = (): Backend['requests'][number] => backend.requests[backend.requests.length - 1]!

  before(async () => {
    backend = await startBackend('web')
    a = await startAdminLb('[global]\nworkers = 1\naccess_log = "{{DIR}}/access.log"\n\n' + mwConfig(backend.address, `
[middlewares.strip]
type = "stripPrefix"
prefixes = ["/app", "/api/v1"]

[middlewares.stripdot]
type = "stripPrefix"
prefixes = ["/dot"]

[middlewares.stripchain]
type = "stripPrefix"
prefixes = ["/chain"]

[middlewares.add]
type = "addPrefix"
prefix = "/v2"

[middlewares.repl]
type = "replacePath"
path = "/fixed/path"

[middlewares.replbad]
type = "replacePath"
path = "/a/../../etc/passwd"
`, { '/app': ['strip'], '/api': ['strip'], '/dot': ['stripdot'], '/chain': ['stripchain', 'add'], '/add': ['add'], '/repl': ['repl'], '/bad': ['replbad'], '/': [] }))
  })
  after(async () => { await a.lb.stop(); await backend.close() })

  test('stripPrefix: the first matching prefix is stripped, the query kept, X-Forwarded-Prefix set (a client\'s own dropped)', async () => {
    let r = await get('/app/users?q=1', { 'x-forwarded-prefix': '/evil' })
    assert.equal(r.status, 200)
    assert.equal(last().url, '/users?q=1')
    assert.equal(last().headers['x-forwarded-prefix'], '/app')
    r = await get('/api/v1/items')
    assert.equal(r.status, 200)
    assert.equal(last().url, '/items')
    assert.equal(last().headers['x-forwarded-prefix'], '/api/v1')
    // the path exactly the prefix: "/" (Traefik sends "/" for an empty path too)
    await get('/app')
    assert.equal(last().url, '/')
    // a string prefix as Traefik's, not a segment: "/appx" → "/x"
    await get('/appx')
    assert.equal(last().url, '/x')
    // a route whose prefix did not match the path: untouched, no header
    await get('/api/v2/items')
    assert.equal(last().url, '/api/v2/items')
    assert.equal(last().headers['x-forwarded-prefix'], undefined)
  })

  test('stripPrefix cannot be bypassed nor made to yield a path lb refuses', async () => {
    // dot segments are resolved before routing: "/app/../admin" is "/admin", routed by the catch-all, never stripped
    for (const p of ['/app/../admin', '/app/%2e%2e/admin', '/app/./../admin']) {
      const r = await get(p)
      assert.equal(r.status, 200, p)
      assert.equal(last().url, '/admin', p)
      assert.equal(last().headers['x-forwarded-prefix'], undefined, p)
    }
    // an encoded slash is refused before routing (the entry point does not allow it)
    const n = backend.requests.length
    let r = await get('/app%2F..')
    assert.equal(r.status, 400)
    assert.match(r.body, /bad request path: encoded "\/" \(%2F\)/)
    // "/dot.." is a normal path; stripped, it would be "/..": refused like a client's "/.." (400), never forwarded
    for (const p of ['/dot..', '/dot../admin']) {
      r = await get(p)
      assert.equal(r.status, 400, p)
      assert.match(r.body, /^bad request path: the path a middleware rewrote it to: "\.\." above the root/, p)
    }
    assert.equal(backend.requests.length, n)
    // a "." segment made by stripping is removed, as in a client's path
    await get('/dot./admin')
    assert.equal(last().url, '/admin')
  })

  test('addPrefix, and middlewares in order: a later one sees the path an earlier one rewrote', async () => {
    await get('/add/x?y=2')
    assert.equal(last().url, '/v2/add/x?y=2')
    await get('/chain/x')
    assert.equal(last().url, '/v2/x')
    assert.equal(last().headers['x-forwarded-prefix'], '/chain')
  })

  test('replacePath: the whole path replaced, the query kept, the original in X-Replaced-Path; a target lb refuses answers 400', async () => {
    await get('/repl/anything?z=1', { 'x-replaced-path': '/forged' })
    assert.equal(last().url, '/fixed/path?z=1')
    assert.equal(last().headers['x-replaced-path'], '/repl/anything')
    const n = backend.requests.length
    const r = await get('/bad')
    assert.equal(r.status, 400)
    assert.match(r.body, /rewrote it to: "\.\." above the root/)
    assert.equal(backend.requests.length, n)
  })

  test('the access log shows the path the backend got', async () => {
    await get('/app/logged?k=v')
    const file = `${a.lb.dir}/access.log`
    let text = ''
    for (let i = 0; i < 100 && !text.includes('/logged'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      try { text = readFileSync(file, 'utf8') } catch {}
    }
    assert.match(text, /"path":"\/logged\?k=v"/)
    assert.doesNotMatch(text, /"path":"\/app\/logged/)
  })

  test('the dashboard API shows each as Traefik does: its type name, its options', async () => {
    const one = async (name: string): Promise<Record<string, unknown>> => JSON.parse((await request(`${a.dash}/api/http/middlewares/${name}@file`)).body) as Record<string, unknown>
    const strip = await one('strip')
    assert.deepEqual(strip.stripPrefix, { prefixes: ['/app', '/api/v1'] })
    assert.equal(strip.type, 'stripprefix')
    assert.equal(strip.status, 'enabled')
    assert.deepEqual(strip.usedBy, ['r0@file', 'r1@file'])
    const add = await one('add')
    assert.deepEqual(add.addPrefix, { prefix: '/v2' })
    assert.equal(add.type, 'addprefix')
    const repl = await one('repl')
    assert.deepEqual(repl.replacePath, { path: '/fixed/path' })
    assert.equal(repl.type, 'replacepath')
  })
})
