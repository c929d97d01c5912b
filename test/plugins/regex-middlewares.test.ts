// The regex middlewares (Traefik's stripPrefixRegex, replacePathRegex,
// redirectRegex) through the real balancer: Go-syntax patterns and replacement
// templates ($1, ${1}, ${name}, $$) as in Traefik's documentation, what the
// backend gets, the headers Traefik sets, no rewrite yielding a path lb would
// refuse from a client, patterns that could backtrack run in linear time
// (a hostile path answered at once), and patterns the linear-time engine cannot
// run refused at load naming the key and why.
/* eslint-disable no-template-curly-in-string -- Go's replacement templates are written ${name} */
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, request, startBackend } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'
import { expandGo } from '../../core/config/rules/linear-regexp.js'

describe('regex middlewares: config validation', () => {
  test('patterns are checked at load: backreferences and lookaround cannot run in linear time', () => {
    assert.match(problems(oneMiddleware('type = "replacePathRegex"\nregex = "^/(a)\\\\1"\nreplacement = "/x"')), /middlewares\.m\.regex: expected a regular expression lb can run in linear time \(.*linear time\)/)
    assert.match(problems(oneMiddleware('type = "stripPrefixRegex"\nregex = ["^/(?=a)"]')), /middlewares\.m\.regex\[0\]: expected a regular expression lb can run in linear time/)
    assert.match(problems(oneMiddleware('type = "stripPrefixRegex"\nregex = ["^/[[:alpha:]]+"]')), /POSIX classes/)
    assert.match(problems(oneMiddleware('type = "stripPrefixRegex"\nregex = []')), /middlewares\.m\.regex: expected at least one regular expression/)
    assert.match(problems(oneMiddleware('type = "redirectRegex"\nregex = "(unclosed"\nreplacement = "x"')), /middlewares\.m\.regex: expected a regular expression/)
    assert.match(problems(oneMiddleware('type = "replacePathRegex"\nregex = "^/a"')), /middlewares\.m\.replacement: expected a string \(required\)/)
  })

  test('Go\'s template expansion: $1, ${1}, $name (longest run), ${name}, $$, unknown groups empty', () => {
    const m = ['/ab/cd', 'ab', 'cd']
    assert.equal(expandGo('/x/$1/${2}', m, { v: 'V' }), '/x/ab/cd')
    assert.equal(expandGo('$1x|${1}x|$$1|$v|${v}-|$9', m, { v: 'V' }), '|abx|$1|V|V-|')
    assert.equal(expandGo('end$', m, undefined), 'end$')
  })
})

describe('regex middlewares through the balancer', () => {
  let backend: Backend, a: AdminLb
  const get = (path: string, headers: Record<string, string> = {}, method = 'GET'): ReturnType<typeof request> => request(a.lb.url, { path, headers, method })
  const last = (): Backend['requests'][number] => backend.requests[backend.requests.length - 1]!

  before(async () => {
    backend = await startBackend('web')
    a = await startAdminLb('[global]\nworkers = 2\naccess_log = "off"\n\n' + mwConfig(backend.address, `
[middlewares.strip]
type = "stripPrefixRegex"
regex = ["/foo/[a-z0-9]+/[0-9]+/", "^/tenant-[0-9]+"]

[middlewares.replace]
type = "replacePathRegex"
regex = "^/old/(?P<section>[a-z]+)/(.*)"
replacement = "/new/\${section}/$2"

[middlewares.evil]
type = "replacePathRegex"
regex = "^/evil/(.*)"
replacement = "/safe/$1/..%2F..%2F?q=1"

[middlewares.hostile]
type = "replacePathRegex"
regex = "^/slow/(a|a)*(a|a)*b$"
replacement = "/matched"

[middlewares.redirect]
type = "redirectRegex"
regex = "^http://([^/:]+)(:[0-9]+)?/go/(.*)"
replacement = "https://\${1}/landing/$3"
permanent = true
`, { '/foo': ['strip'], '/tenant-': ['strip'], '/old': ['replace'], '/evil': ['evil'], '/slow': ['hostile'], '/go': ['redirect'], '/': [] }))
  })
  after(async () => { await a.lb.stop(); await backend.close() })

  test('stripPrefixRegex: the matched prefix goes, in X-Forwarded-Prefix (a client\'s own dropped)', async () => {
    assert.equal((await get('/foo/abc/123/bar?x=1', { 'x-forwarded-prefix': '/spoof' })).status, 200)
    assert.equal(last().url, '/bar?x=1')
    assert.equal(last().headers['x-forwarded-prefix'], '/foo/abc/123/')
    assert.equal((await get('/tenant-42')).status, 200)
    assert.equal(last().url, '/', 'the rest gets its leading "/"')
    // no match: untouched
    assert.equal((await get('/foo/ABC/x')).status, 200)
    assert.equal(last().url, '/foo/ABC/x')
    assert.equal(last().headers['x-forwarded-prefix'], undefined)
  })

  test('replacePathRegex: named and numbered groups, X-Replaced-Path, the query kept', async () => {
    assert.equal((await get('/old/docs/a/b?page=2')).status, 200)
    assert.equal(last().url, '/new/docs/a/b?page=2')
    assert.equal(last().headers['x-replaced-path'], '/old/docs/a/b')
  })

  test('a replacement cannot take the path past the entry point\'s rules (encoded slashes, a smuggled query)', async () => {
    const before = backend.requests.length
    const r = await get('/evil/x')
    assert.equal(r.status, 400)
    assert.match(r.body, /bad request path: the path a middleware rewrote it to: encoded "\/"/)
    assert.equal(backend.requests.length, before)
  })

  test('a pattern that backtracks exponentially elsewhere runs in linear time here (a 12 KB hostile path, answered at once)', async () => {
    const hostile = '/slow/' + 'a'.repeat(12_000) + 'c'
    const r = await get(hostile)
    assert.equal(r.status, 200)
    assert.equal(last().url, hostile, 'no match: untouched')
    assert.equal((await get('/slow/aaab')).status, 200)
    assert.equal(last().url, '/matched')
  })

  test('redirectRegex: the whole URL matched, the Location built from its groups; 301 for GET, 308 for POST', async () => {
    const r = await get('/go/somewhere?x=1', { host: 'example.com:8080' })
    assert.equal(r.status, 301)
    assert.equal(r.headers.location, 'https://example.com/landing/somewhere?x=1')
    assert.equal((await get('/go/a', { host: 'example.com' }, 'POST')).status, 308)
  })

  test('the dashboard API shows them with Traefik\'s names', async () => {
    const m = JSON.parse((await request(`${a.dash}/api/http/middlewares/replace@file`)).body) as Record<string, unknown>
    assert.equal(m.type, 'replacepathregex')
    assert.deepEqual(m.replacePathRegex, { regex: '^/old/(?P<section>[a-z]+)/(.*)', replacement: '/new/${section}/$2' })
  })
})
