// Traefik's own rule examples (docs: routing/routers "Rules & Priority", each
// matcher's table and the "Priority Calculation" example) written in lb's TOML:
// `lb check` accepts them and the running balancer behaves as the docs say.
// Then what routing sees of a path (the normalised one: dot segments, double
// slashes and escapes cannot steer a request past a rule), and what `lb check`
// refuses in a rule, with its reason.
import { strict as assert } from 'node:assert'
import { execFile } from 'node:child_process'
import http from 'node:http'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { type Backend, CLI, type Lb, request, startBackend, startLb, tempDir } from '../helpers.js'
import { json, startAdminLb, type AdminLb } from '../admin/util.js'

const run = promisify(execFile)

/** [rule, requests that match, requests that do not]; a request is a path or [path, options] */
type Req = string | [string, http.RequestOptions]
const DOCS: Array<[string, Req[], Req[], string?]> = [
  ['Header(`Content-Type`, `application/yaml`)', [['/', { headers: { 'content-type': 'application/yaml' } }]], [['/', { headers: { 'content-type': 'application/json' } }]]],
  ['HeaderRegexp(`Content-Type`, `^application/(json|yaml)$`)', [['/', { headers: { 'content-type': 'application/json' } }]], [['/', { headers: { 'content-type': 'Application/JSON' } }]]],
  ['HeaderRegexp(`Content-Type`, `(?i)^application/(json|yaml)$`)', [['/', { headers: { 'content-type': 'Application/JSON' } }]], [['/', { headers: { 'content-type': 'text/yaml' } }]]],
  ['Host(`example.com`)', [['/', { headers: { host: 'example.com' } }]], [['/', { headers: { host: 'www.example.com' } }]]],
  ['Host(`*.example.com`)', [['/', { headers: { host: 'foo.example.com' } }]], [['/', { headers: { host: 'foo.bar.example.com' } }], ['/', { headers: { host: 'example.com' } }]]],
  ['HostRegexp(`^.+\\.example\\.com$`)', [['/', { headers: { host: 'a.b.example.com' } }]], [['/', { headers: { host: 'example.com' } }]]],
  ['HostRegexp(`^example\\.(com|org)$`)', [['/', { headers: { host: 'example.org' } }]], [['/', { headers: { host: 'example.net' } }]]],
  ['HostRegexp(`(?i)^example\\.(com|org)$`)', [['/', { headers: { host: 'EXAMPLE.ORG' } }]], [['/', { headers: { host: 'example.net' } }]]],
  ['Method(`OPTIONS`)', [['/', { method: 'OPTIONS' }]], ['/']],
  ['Path(`/products`)', ['/products'], ['/products/shoes', '/products/']],
  ['PathPrefix(`/products`)', ['/products', '/products/shoes', '/products/', '/products-for-sale'], ['/product']],
  ['PathRegexp(`^/products/(shoes|socks)/[0-9]+$`)', ['/products/shoes/31', '/products/socks/7'], ['/products/hats/1', '/products/shoes/31/x']],
  ['PathRegexp(`\\.(jpeg|jpg|png)$`)', ['/img/a.jpeg', '/b.png'], ['/a.gif', '/a.png/x']],
  ['PathRegexp(`(?i)^/products`)', ['/products', '/PRODUCTS/shoes', '/Products-for-sale'], ['/x/products']],
  ['Query(`mobile`, `true`)', ['/search?mobile=true'], ['/search?mobile=false', '/search']],
  ['Query(`mobile`)', ['/search?mobile'], ['/search?mobile=true']],
  ['QueryRegexp(`mobile`, `^(true|yes)$`)', ['/search?mobile=yes', '/search?mobile=true'], ['/search?mobile=no']],
  ['QueryRegexp(`mobile`, `^.*$`)', ['/search?mobile=', '/search?mobile=x'], ['/search?other=1']],
  ['QueryRegexp(`mobile`, `(?i)^(true|yes)$`)', ['/search?mobile=YES'], ['/search?mobile=maybe']],
  ['ClientIP(`10.76.105.11`)', [], ['/']],
  ['ClientIP(`::1`)', ['/'], [], '[::1]'],
  ['ClientIP(`192.168.1.0/24`)', [], ['/']],
  ['ClientIP(`fe80::/10`)', [], ['/'], '[::1]'],
]

describe('Traefik v3 documentation examples', () => {
  let yes: Backend, no: Backend, s1: Backend, s2: Backend
  // an lb has at most 16 entry points: the examples, one entry point each, are split over two
  const half = 12
  const lbs: AdminLb[] = []
  const tomls: string[] = []
  /** the lb and entry point of example i */
  const at = (i: number): [AdminLb, string] => [lbs[i < half ? 0 : 1]!, `e${i}`]
  before(async () => {
    [yes, no, s1, s2] = await Promise.all(['yes', 'no', 'service-1', 'service-2'].map((n) => startBackend(n))) as [Backend, Backend, Backend, Backend]
    let services = ''
    for (const [name, b] of [['yes', yes], ['no', no], ['service-1', s1], ['service-2', s2]] as const) {
      services += `[services.${name}]\n[[services.${name}.servers]]\naddress = "${b.address}"\ncheck = false\n`
    }
    for (const part of [DOCS.slice(0, half), DOCS.slice(half)]) {
      let toml = '[entrypoints.web]\naddress = "127.0.0.1:{{PORT}}"\n' + services
      part.forEach(([rule, , , host], j) => {
        const i = j + (tomls.length === 0 ? 0 : half)
        toml += `[entrypoints.e${i}]\naddress = "${host ?? '127.0.0.1'}:0"\n[routers.r${i}]\nrule = '${rule}'\nentrypoints = ["e${i}"]\nservice = "yes"\n`
        toml += `[routers.f${i}]\nrule = 'PathPrefix(\`/\`)'\npriority = 1\nentrypoints = ["e${i}"]\nservice = "no"\n`
      })
      tomls.push(toml)
    }
    // "Priority Calculation": with default priorities (34 and 26) foobar.traefik.com goes to Router-1; with 1 and 2, to Router-2
    let toml = '[entrypoints.p1]\naddress = "127.0.0.1:0"\n[entrypoints.p2]\naddress = "127.0.0.1:0"\n'
    toml += '[routers.Router-1]\nrule = \'HostRegexp(`[a-z]+\\.traefik\\.com`)\'\nentrypoints = ["p1"]\nservice = "service-1"\n'
    toml += '[routers.Router-2]\nrule = \'Host(`foobar.traefik.com`)\'\nentrypoints = ["p1"]\nservice = "service-2"\n'
    toml += '[routers.Router-1p]\nrule = \'HostRegexp(`[a-z]+\\.traefik\\.com`)\'\nentrypoints = ["p2"]\nservice = "service-1"\npriority = 1\n'
    toml += '[routers.Router-2p]\nrule = \'Host(`foobar.traefik.com`)\'\nentrypoints = ["p2"]\nservice = "service-2"\npriority = 2\n'
    tomls[1] += toml
    for (const t of tomls) lbs.push(await startAdminLb(t))
  })
  after(async () => {
    for (const a of lbs) await a.lb.stop()
    for (const b of [yes, no, s1, s2]) await b.close()
  })

  test('lb check accepts the examples', async () => {
    for (const toml of tomls) {
      const file = join(tempDir('lb-rules-'), 'lb.toml')
      writeFileSync(file, toml.replace('{{PORT}}', '0'))
      const r = await run(process.execPath, [CLI, 'check', '-c', file])
      assert.match(r.stdout, /test is successful/)
    }
  })

  test('each matcher behaves as its table says', async () => {
    for (const [i, [rule, hits, misses, host]] of DOCS.entries()) {
      const [a, ep] = at(i)
      const port = await a.lb.portOf(ep)
      for (const [want, reqs] of [['yes', hits], ['no', misses]] as const) {
        for (const q of reqs) {
          const [path, opts] = typeof q === 'string' ? [q, {}] : q
          const r = await request(`http://${host ?? '127.0.0.1'}:${port}`, { path, ...opts })
          assert.equal(r.body.trim(), want, `${rule} ${JSON.stringify(q)}`)
        }
      }
    }
  })

  test('Priority Calculation: the priorities of the table, and the fix by setting them', async () => {
    const host = { host: 'foobar.traefik.com' }
    const a = lbs[1]!
    assert.equal((await request(`http://127.0.0.1:${await a.lb.portOf('p1')}/`, { headers: host })).body.trim(), 'service-1')
    assert.equal((await request(`http://127.0.0.1:${await a.lb.portOf('p2')}/`, { headers: host })).body.trim(), 'service-2')
    const shown = async (name: string): Promise<unknown> => ((await json(`${a.dash}/api/http/routers/${name}@file`)).json as { priority: number }).priority
    assert.deepEqual([await shown('Router-1'), await shown('Router-2'), await shown('Router-1p'), await shown('Router-2p')], [34, 26, 1, 2])
  })
})

describe('routing sees the normalised path', () => {
  let admin: Backend, secret: Backend, other: Backend, lb: Lb
  before(async () => {
    [admin, secret, other] = await Promise.all(['admin', 'secret', 'other'].map((n) => startBackend(n))) as [Backend, Backend, Backend]
    lb = await startLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.admin]
rule = 'PathRegexp(\`^/admin(/|$)\`)'
service = "admin"
[routers.secret]
rule = 'Path(\`/secret\`) || Path(\`/a b\`)'
service = "secret"
[routers.other]
rule = 'PathPrefix(\`/\`)'
service = "other"
${[['admin', admin], ['secret', secret], ['other', other]].map(([n, b]) => `[services.${n as string}]\n[[services.${n as string}.servers]]\naddress = "${(b as Backend).address}"\ncheck = false\n`).join('')}`)
  })
  after(async () => { await lb.stop(); for (const b of [admin, secret, other]) await b.close() })

  test('dot segments, double slashes and escapes reach the router they resolve to, and the backend sees that path', async () => {
    const cases: Array<[string, Backend, string]> = [
      ['/public/../admin/x', admin, '/admin/x'],
      ['/public/%2e%2E/admin/x', admin, '/admin/x'],
      ['//admin//x', admin, '/admin/x'],
      ['/%61dmin', admin, '/admin'],
      ['/x/..//secret', secret, '/secret'],
      ['/./secret?q=1', secret, '/secret?q=1'],
      ['/a%20b', secret, '/a%20b'], // Path(`/a b`) matches the escaped space, as Traefik's routing path
      ['/Secret', other, '/Secret'],
    ]
    for (const [path, backend, seen] of cases) {
      const before = backend.requests.length
      const r = await request(lb.url, { path })
      assert.equal(`${r.status} ${r.body.trim()}`, `200 ${backend === admin ? 'admin' : backend === secret ? 'secret' : 'other'}`, path)
      await new Promise((resolve) => setTimeout(resolve, 5))
      assert.equal(backend.requests.at(-1)?.url, seen, path)
      assert.ok(backend.requests.length > before)
    }
    // an encoded slash would read as /admin/x to a backend that decodes it: refused, not routed to `other`
    const r = await request(lb.url, { path: '/admin%2Fx' })
    assert.equal(r.status, 400)
    assert.equal(other.requests.some((q) => q.url.includes('%2F')), false)
  })

  test('a pattern that makes a backtracking engine run for ever answers at once (a DFA)', async () => {
    const r = await request(lb.url, { path: '/admin' + 'a'.repeat(4000) + '!' })
    assert.equal(r.body.trim(), 'other')
  })
})

describe('lb check refuses what cannot be matched safely, with the reason', () => {
  const check = async (rule: string): Promise<string> => {
    const file = join(tempDir('lb-rules-'), 'lb.toml')
    writeFileSync(file, `[entrypoints.web]\naddress = "127.0.0.1:0"\n[routers.api]\nrule = '${rule}'\nservice = "s"\n[services.s]\n[[services.s.servers]]\naddress = "127.0.0.1:9"\n`)
    return run(process.execPath, [CLI, 'check', '-c', file]).then(() => 'accepted', (err: { code: number, stderr: string }) => {
      assert.equal(err.code, 1)
      return err.stderr
    })
  }

  test('backtracking constructs, patterns whose automaton explodes, v2 syntax, bad values', async () => {
    // nested quantifiers backtrack exponentially in PCRE-style engines; lb's DFA runs them in linear time
    assert.equal(await check('PathRegexp(`^(a+)+$`) || PathRegexp(`^(\\w+\\s?)*$`)'), 'accepted')
    assert.match(await check('PathRegexp(`^/(a)\\1$`)'), /routers\.api\.rule: column 18 of rule .*: PathRegexp value "\^\/\(a\)\\\\1\$": invalid regexp: backreferences \(\\1\) are not RE2 syntax/)
    assert.match(await check('HeaderRegexp(`X`, `^(?=a)`)'), /routers\.api\.rule: column 21 .*lookaround assertions .* are not RE2 syntax/)
    assert.match(await check('PathRegexp(`(a|b)*a(a|b){40}`)'), /routers\.api\.rule: .*the regexp needs more than 4000 automaton states .*simplify it/)
    assert.match(await check('HostRegexp(`{subdomain:[a-z]+}.example.com`)'),
      /routers\.api\.rule: column 13 .*\{subdomain:\[a-z\]\+\} is Traefik v2 syntax; Traefik v3 takes the regexp itself: HostRegexp\(`\^\[a-z\]\+\\\.example\\\.com\$`\)/)
    assert.match(await check('Host(`a.example`) && PathPrefix(`/x`) ||'), /routers\.api\.rule: column 41 of rule .*: expected a matcher \(Host, HostRegexp, .*\), "!" or "\(", found the end of the rule/)
    assert.match(await check('(Host(`a.example`)'), /column 19 .*expected "\)" to close the "\(" at column 1, found the end of the rule/)
    assert.match(await check('Query()'), /column 7 .*expected a value in backticks or double quotes, found "\)"/)
    assert.match(await check('Header(`X-A`)'), /column 1 .*Header takes 2 values, found 1/)
    assert.match(await check('ClientIP(`10.0.0.0/33`)'), /column 11 .*ClientIP value "10\.0\.0\.0\/33": expected an IPv4 or IPv6 address or CIDR/)
    assert.match(await check('Path(`/a/../b`)'), /never matches: request paths have their "\.\." segments resolved before routing/)
    assert.match(await check('Host(`a.example:8080`)'), /Host value "a\.example:8080": expected a host name, found a port/)
  })
})
