// Router rules through the real balancer (2 workers) with a real backend per
// router: each Traefik v3 matcher, negation, parentheses and priorities, each
// also as the dashboard API shows it (Traefik's router object: the rule, and the
// priority routing uses: its length when not set). A second entry point on
// [::1] carries the IPv6 ClientIP rules.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Reply, request, startBackend } from '../helpers.js'
import { type AdminLb, json, startAdminLb } from '../admin/util.js'

/** router name → [rule, priority as configured (0 = none)], on the entry point `web` unless said */
const ROUTERS: Record<string, [string, number, string?]> = {
  host: ['Host(`host.example`)', 0],
  wild: ['Host(`*.wild.example`)', 0],
  hostre: ['HostRegexp(`^[a-z]+\\.re\\.example$`)', 0],
  path: ['Path(`/exact`)', 0],
  prefix: ['PathPrefix(`/prefix/`)', 0],
  pathre: ['PathRegexp(`^/items/[0-9]+$`)', 0],
  method: ['Method(`PUT`)', 0],
  header: ['Header(`X-Tenant`, `blue`)', 0],
  headerre: ['HeaderRegexp(`X-Version`, `^v[0-9]+$`)', 0],
  query: ['Query(`mobile`, `true`)', 0],
  queryre: ['QueryRegexp(`lang`, `^(en|fr)$`)', 0],
  ip4: ['ClientIP(`127.0.0.2`) || ClientIP(`10.0.0.0/8`)', 0],
  ip6: ['ClientIP(`::1/128`)', 0, 'v6'],
  ip6other: ['ClientIP(`2001:db8::/32`) && PathPrefix(`/`)', 100, 'v6'],
  neg: ['!Method(`GET`) && PathPrefix(`/neg/`)', 0],
  paren: ['(Header(`X-A`, `1`) || Header(`X-B`, `1`)) && Path(`/paren`)', 0],
  long: ['PathPrefix(`/prio/aaaaaaaaaaaaaaaaaaaa`)', 0],
  explicit: ['PathPrefix(`/prio/`)', 1000],
  'tie-b': ['Path(`/tie`)', 500],
  'tie-a': ['Path(`/tie`) || Path(`/tie2`)', 500],
  fallback: ['PathPrefix(`/`)', 1],
  fallback6: ['PathPrefix(`/`)', 1, 'v6'],
}

describe('router rules', () => {
  const backends = new Map<string, Backend>()
  let a: AdminLb
  let v6 = 0
  before(async () => {
    for (const name of Object.keys(ROUTERS)) backends.set(name, await startBackend(name))
    let toml = '[entrypoints.web]\naddress = "127.0.0.1:{{PORT}}"\n[entrypoints.v6]\naddress = "[::1]:0"\n'
    for (const [name, [rule, priority, ep]] of Object.entries(ROUTERS)) {
      toml += `[routers.${name}]\nrule = '${rule}'\nservice = "${name}"\nentrypoints = ["${ep ?? 'web'}"]\n${priority !== 0 ? `priority = ${priority}\n` : ''}`
      toml += `[services.${name}]\n[[services.${name}.servers]]\naddress = "${backends.get(name)!.address}"\ncheck = false\n`
    }
    a = await startAdminLb(toml)
    v6 = await a.lb.portOf('v6')
  })
  after(async () => {
    await a.lb.stop()
    for (const b of backends.values()) await b.close()
  })

  /** Which router's backend answered. */
  const via = async (path: string, opts: http.RequestOptions = {}): Promise<string> => {
    const r: Reply = await request(a.lb.url, { path, ...opts })
    assert.equal(r.status, 200, `${path}: ${r.status} ${r.body}`)
    return r.body.trim()
  }
  /** The dashboard API's router `name` shows its rule and the priority routing uses. */
  const shown = async (...names: string[]): Promise<void> => {
    for (const name of names) {
      const [rule, priority] = ROUTERS[name]!
      const r = await json(`${a.dash}/api/http/routers/${name}@file`)
      assert.equal(r.status, 200)
      const o = r.json as { rule: string, priority: number, priorityStr: string }
      const effective = priority !== 0 ? priority : Buffer.byteLength(rule)
      assert.deepEqual([o.rule, o.priority, o.priorityStr], [rule, effective, String(effective)], name)
    }
  }

  test('Host: exact name, any case, without port or trailing dot; *. wildcards one label', async () => {
    for (const h of ['host.example', 'HOST.Example:8080', 'host.example.']) assert.equal(await via('/', { headers: { host: h } }), 'host', h)
    assert.equal(await via('/', { headers: { host: 'x.host.example' } }), 'fallback')
    assert.equal(await via('/', { headers: { host: 'a.wild.example' } }), 'wild')
    assert.equal(await via('/', { headers: { host: 'a.b.wild.example' } }), 'fallback')
    assert.equal(await via('/', { headers: { host: 'wild.example' } }), 'fallback')
    await shown('host', 'wild')
  })

  test('HostRegexp: the lower-cased host without its port', async () => {
    assert.equal(await via('/', { headers: { host: 'Shop.RE.example:81' } }), 'hostre')
    assert.equal(await via('/', { headers: { host: 'shop1.re.example' } }), 'fallback')
    await shown('hostre')
  })

  test('Path, PathPrefix and PathRegexp', async () => {
    assert.equal(await via('/exact'), 'path')
    assert.equal(await via('/exact/'), 'fallback')
    assert.equal(await via('/exact?x=1'), 'path')
    assert.equal(await via('/prefix/a/b'), 'prefix')
    assert.equal(await via('/prefix'), 'fallback')
    assert.equal(await via('/items/42'), 'pathre')
    assert.equal(await via('/items/42x'), 'fallback')
    await shown('path', 'prefix', 'pathre')
  })

  test('Method, Header and HeaderRegexp', async () => {
    assert.equal(await via('/m', { method: 'PUT' }), 'method')
    assert.equal(await via('/m', { method: 'POST' }), 'fallback')
    assert.equal(await via('/h', { headers: { 'x-tenant': 'blue' } }), 'header')
    assert.equal(await via('/h', { headers: { 'X-Tenant': 'Blue' } }), 'fallback', 'values compare exactly')
    assert.equal(await via('/h', { headers: { 'x-version': 'v12' } }), 'headerre')
    assert.equal(await via('/h', { headers: { 'x-version': 'v12-beta' } }), 'fallback')
    await shown('method', 'header', 'headerre')
  })

  test('Query and QueryRegexp: decoded values, "&"-separated pairs', async () => {
    assert.equal(await via('/q?a=1&mobile=true'), 'query')
    assert.equal(await via('/q?mobile=%74rue'), 'query')
    assert.equal(await via('/q?mobile=truex'), 'fallback')
    assert.equal(await via('/q?mobile'), 'fallback')
    assert.equal(await via('/q?lang=fr'), 'queryre')
    assert.equal(await via('/q?x=%zz&lang=en'), 'queryre', 'a bad pair does not spoil the next')
    assert.equal(await via('/q?lang=de'), 'fallback')
    await shown('query', 'queryre')
  })

  test('ClientIP: IPv4 addresses and CIDRs, IPv6 CIDRs, on the peer address', async () => {
    assert.equal(await via('/ip', { localAddress: '127.0.0.2' }), 'ip4')
    assert.equal(await via('/ip', { localAddress: '127.0.0.3' }), 'fallback')
    assert.equal(await via('/ip', { localAddress: '127.0.0.3', headers: { 'x-forwarded-for': '127.0.0.2' } }), 'fallback', 'not X-Forwarded-For')
    const r = await request(`http://[::1]:${v6}/ip`)
    assert.equal(r.body.trim(), 'ip6')
    await shown('ip4', 'ip6', 'ip6other')
  })

  test('negation and parentheses', async () => {
    assert.equal(await via('/neg/x', { method: 'POST' }), 'neg')
    assert.equal(await via('/neg/x'), 'fallback')
    assert.equal(await via('/paren', { headers: { 'x-b': '1' } }), 'paren')
    // without the parentheses, && would bind tighter and X-A alone would match anywhere
    assert.equal(await via('/elsewhere', { headers: { 'x-a': '1' } }), 'fallback')
    await shown('neg', 'paren')
  })

  test('priority: the rule length by default, a set priority over it, ties by router name', async () => {
    assert.equal(await via('/prio/aaaaaaaaaaaaaaaaaaaa/x'), 'explicit')
    assert.equal(await via('/tie'), 'tie-a')
    assert.equal(await via('/tie2'), 'tie-a')
    await shown('long', 'explicit', 'tie-a', 'tie-b', 'fallback')
    const byPriority = (await json(`${a.dash}/api/http/routers?sortBy=priority&direction=desc&search=prio`)).json as Array<{ name: string }>
    assert.deepEqual(byPriority.map((x) => x.name), ['explicit@file', 'long@file'])
  })
})
