// Mirroring (Traefik's `mirroring` service; nginx's `mirror`): through the real
// balancer with two workers, every request goes to the main service and a copy
// of `percent` of them to each mirror, with the same method, path, headers and
// body (within max_body_size); the mirror's answer is dropped; a mirror that
// never answers or refuses connections changes nothing for the client; a body
// over the bound is not mirrored. Config errors and the dashboard view too.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, freePort, request, startBackend, waitFor } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { problems } from '../plugins/setup.js'

const head = `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.r]
rule = "PathPrefix(\`/\`)"
service = "m"
[services.main]
[[services.main.servers]]
address = "127.0.0.1:1"
check = false
`

describe('mirroring: config validation', () => {
  test('a main service, mirrors with servers, percent 0-100', () => {
    assert.match(problems(head + '[services.m]\nkind = "mirroring"\nservice = "main"\n'), /services\.m\.mirrors: expected at least one \[\[services\.m\.mirrors\]\]/)
    assert.match(problems(head + '[services.m]\nkind = "mirroring"\nservice = "main"\n[[services.m.mirrors]]\nname = "nope"\n'), /services\.m: unknown service "nope"/)
    assert.match(problems(head + '[services.m]\nkind = "mirroring"\nservice = "main"\n[[services.m.mirrors]]\nname = "main"\npercent = 120\n'), /services\.m\.mirrors\[0\]\.percent: expected a number from 0 to 100/)
    assert.match(problems(head + '[services.w]\nkind = "weighted"\n[[services.w.services]]\nname = "main"\n[services.m]\nkind = "mirroring"\nservice = "main"\n[[services.m.mirrors]]\nname = "w"\n'), /mirror "w" is of kind "weighted"; a mirror is a service with servers/)
    assert.match(problems(head + '[services.m]\nkind = "mirroring"\nservice = "main"\nfallback = "main"\n[[services.m.mirrors]]\nname = "main"\n'), /services\.m\.fallback: not a key of a mirroring service/)
  })
})

describe('mirroring through the balancer', () => {
  let main: Backend, all: Backend, half: Backend, silent: Backend, a: AdminLb
  const body = (n: number): string => 'x'.repeat(n)

  before(async () => {
    main = await startBackend('main')
    all = await startBackend('all', (req, res) => { req.resume(); req.on('end', () => { res.statusCode = 500; res.end('mirror answers are dropped\n') }) })
    half = await startBackend('half')
    silent = await startBackend('silent', (req) => { req.resume() }) // never answers
    const dead = await freePort()
    const svc = (name: string, address: string): string => `[services.${name}]\n[[services.${name}.servers]]\naddress = "${address}"\ncheck = false\nmax_fails = 0\n`
    a = await startAdminLb(`[global]
workers = 2
access_log = "off"

[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.r]
rule = "PathPrefix(\`/\`)"
service = "m"
[services.m]
kind = "mirroring"
service = "main"
max_body_size = "1k"
[[services.m.mirrors]]
name = "all"
percent = 100
[[services.m.mirrors]]
name = "half"
percent = 50
[[services.m.mirrors]]
name = "silent"
[[services.m.mirrors]]
name = "dead"
${svc('main', main.address)}${svc('all', all.address)}${svc('half', half.address)}${svc('silent', silent.address)}${svc('dead', `127.0.0.1:${dead}`)}`)
  })
  after(async () => { await a.lb.stop(); await Promise.all([main, all, half, silent].map((b) => b.close())) })

  test('every request reaches the main service and, as it was, the 100% mirror; the client gets the main answer at once', async () => {
    const r = await request(`${a.lb.url}/orders?id=7`, { method: 'POST', headers: { 'content-type': 'text/plain', 'x-trace': 'abc' }, body: 'hello mirror' })
    assert.equal(r.status, 200)
    assert.equal(r.body, 'main\n', 'the client gets the main answer, not a mirror\'s 500, though one mirror never answers and one is down')
    const copy = await waitFor(() => all.requests.find((q) => q.url === '/orders?id=7'), 'the copy at the mirror')
    assert.equal(copy.method, 'POST')
    assert.equal(copy.headers['x-trace'], 'abc')
    assert.equal(copy.body, 'hello mirror'.length)
    assert.equal(main.requests.filter((q) => q.url === '/orders?id=7').length, 1)
  })

  test('percent: 50% of 100 requests over both workers reach the 50% mirror, all reach the 100% one', async () => {
    const before = { all: all.requests.length, half: half.requests.length }
    for (let i = 0; i < 100; i += 10) await Promise.all(Array.from({ length: 10 }, (_, j) => request(`${a.lb.url}/p${i + j}`)))
    await waitFor(() => all.requests.length - before.all >= 100 || null, 'the copies')
    const n = half.requests.length - before.half
    // each worker copies every second request it serves: 50 over both, give or take one per worker
    assert.ok(Math.abs(n - 50) <= 2, `${n} copies`)
  })

  test('a body over max_body_size is served but not mirrored', async () => {
    const r = await request(`${a.lb.url}/big`, { method: 'POST', body: body(4096) })
    assert.equal(r.status, 200)
    assert.equal(main.requests.find((q) => q.url === '/big')?.body, 4096)
    // a later small request's copy arrives; the big one's never does
    await request(`${a.lb.url}/after-big`)
    await waitFor(() => all.requests.find((q) => q.url === '/after-big'), 'the next copy')
    assert.equal(all.requests.find((q) => q.url === '/big'), undefined)
  })

  test('the dashboard API shows it as Traefik\'s', async () => {
    const s = JSON.parse((await request(`${a.dash}/api/http/services/m@file`)).body) as Record<string, unknown>
    assert.equal(s.type, 'mirroring')
    assert.deepEqual(s.mirroring, { service: 'main', mirrors: [{ name: 'all', percent: 100 }, { name: 'half', percent: 50 }, { name: 'silent', percent: 100 }, { name: 'dead', percent: 100 }], maxBodySize: 1024 })
  })
})
