// chain (Traefik's): a named list of middlewares that routers share. Through the
// real balancer: the middlewares it names run in its order (a chain inside a
// chain too), exactly as if the router named them; the dashboard API shows it
// as Traefik's does; a chain that contains itself or names an unknown
// middleware is refused naming the key.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, request, startBackend } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'

describe('chain: config validation', () => {
  test('a list of at least one middleware name, each defined; no chain contains itself', () => {
    assert.match(problems(oneMiddleware('type = "chain"')), /middlewares\.m\.middlewares: expected a list of at least one middleware name/)
    assert.match(problems(oneMiddleware('type = "chain"\nmiddlewares = ["nope"]')), /middlewares\.m\.middlewares: unknown middleware "nope"/)
    assert.match(problems(oneMiddleware('type = "chain"\nmiddlewares = ["m"]')), /middlewares\.m\.middlewares: a chain cannot contain itself \(m → m\)/)
    const loop = mwConfig('127.0.0.1:1', '[middlewares.a]\ntype = "chain"\nmiddlewares = ["b"]\n[middlewares.b]\ntype = "chain"\nmiddlewares = ["a"]\n', { '/': ['a'] })
    assert.match(problems(loop), /middlewares\.b\.middlewares: a chain cannot contain itself \(a → b → a\)/)
    assert.match(problems(oneMiddleware('type = "chain"\nmiddlewares = ["x"]\nprefix = "/a"')), /middlewares\.m\.prefix: unknown key \(allowed: middlewares\)/)
  })
})

describe('chain through the balancer', () => {
  let backend: Backend, a: AdminLb
  const get = (path: string, headers: Record<string, string> = {}): ReturnType<typeof request> => request(a.lb.url, { path, headers })
  const last = (): Backend['requests'][number] => backend.requests[backend.requests.length - 1]!

  before(async () => {
    backend = await startBackend('web')
    a = await startAdminLb('[global]\nworkers = 2\naccess_log = "off"\n\n' + mwConfig(backend.address, `
[middlewares.strip]
type = "stripPrefix"
prefixes = ["/app"]

[middlewares.add]
type = "addPrefix"
prefix = "/v2"

[middlewares.deny]
type = "ipAllowList"
source_range = ["192.0.2.1"]

[middlewares.rewrite]
type = "chain"
middlewares = ["strip", "add"]

[middlewares.outer]
type = "chain"
middlewares = ["rewrite", "deny"]
`, { '/app': ['rewrite'], '/closed': ['outer'], '/': [] }))
  })
  after(async () => { await a.lb.stop(); await backend.close() })

  test('the middlewares run in the chain\'s order: strip, then add', async () => {
    const r = await get('/app/users?q=1')
    assert.equal(r.status, 200)
    assert.equal(last().url, '/v2/users?q=1')
    assert.equal(last().headers['x-forwarded-prefix'], '/app')
  })

  test('a chain inside a chain: its middlewares run too (ipAllowList refuses 127.0.0.1)', async () => {
    const before = backend.requests.length
    assert.equal((await get('/closed/x')).status, 403)
    assert.equal(backend.requests.length, before)
  })

  test('the dashboard API shows a chain as Traefik does, and the middlewares it names as used by its routers', async () => {
    const one = async (name: string): Promise<Record<string, unknown>> => JSON.parse((await request(`${a.dash}/api/http/middlewares/${name}@file`)).body) as Record<string, unknown>
    const rewrite = await one('rewrite')
    assert.deepEqual(rewrite.chain, { middlewares: ['strip', 'add'] })
    assert.equal(rewrite.type, 'chain')
    assert.deepEqual(rewrite.usedBy, ['r0@file'])
    assert.deepEqual((await one('strip')).usedBy, ['r0@file', 'r1@file'])
    assert.deepEqual((await one('deny')).usedBy, ['r1@file'])
    const router = JSON.parse((await request(`${a.dash}/api/http/routers/r1@file`)).body) as Record<string, unknown>
    assert.deepEqual(router.middlewares, ['outer'])
  })
})
