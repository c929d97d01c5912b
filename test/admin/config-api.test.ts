// Config API (HAProxy Data Plane API v2 model) through real sockets: golden
// bodies, error mapping, concurrent writers with and without `version`,
// changes reaching live traffic without dropping a request, persistence across
// a restart, authentication.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { CLI, count, getMany, reloadApplied, request, simpleConfig, startBackend, waitFor } from '../helpers.js'
import { backends, golden, normalize, restartLb, send, startAdminLb } from './util.js'

const CFG = '/v2/services/lb/configuration'

test('config API: CRUD, errors, versions, live effect, persistence', async (t) => {
  const [b1, b2] = await backends(2)
  const a = await startAdminLb(simpleConfig([b1!.address]))
  t.after(async () => { await a.lb.stop(); await b1!.close(); await b2!.close() })
  const ports = { B1PORT: b1!.port, B2PORT: b2!.port }
  const g = (name: string, v: unknown): void => golden(name, normalize(JSON.stringify(v, null, 2) + '\n', ports))

  // reads
  let r = await send('GET', `${a.admin}${CFG}/backends`)
  assert.equal(r.status, 200)
  assert.equal(r.headers['configuration-version'], '1')
  g('config-api-backends.json', r.json)
  r = await send('GET', `${a.admin}${CFG}/version`)
  assert.equal(r.body.trim(), '1')

  // the seed's call: no version, 201 with the stored object
  r = await send('POST', `${a.admin}${CFG}/backends`, { name: 'api', balance: { algorithm: 'roundrobin' } })
  assert.equal(r.status, 201, r.body)
  assert.equal(r.headers['configuration-version'], '2')
  g('config-api-post-backend.json', r.json)

  // errors: duplicate, unknown, bad JSON, unknown field, wrong type, missing name, bad enum, version mismatch, not JSON
  const errors: Record<string, unknown> = {}
  const expect = async (label: string, status: number, p: Promise<{ status: number, json: unknown }>): Promise<void> => {
    const x = await p
    assert.equal(x.status, status, `${label}: ${JSON.stringify(x.json)}`)
    const body = x.json as { code: number, message: string }
    assert.equal(typeof body.code, 'number', label)
    assert.equal(typeof body.message, 'string', label)
    // the JSON parser's own wording differs between Node versions
    errors[label] = { status: x.status, code: body.code, message: body.message.replace(/(failed, because ).*(Expected|Unexpected).*$/s, '$1<JSON parser message>') }
  }
  await expect('duplicate', 409, send('POST', `${a.admin}${CFG}/backends`, { name: 'api', balance: { algorithm: 'roundrobin' } }))
  await expect('unknown backend', 404, send('GET', `${a.admin}${CFG}/backends/nope`))
  await expect('unparsable body', 400, send('POST', `${a.admin}${CFG}/backends`, '{"name": "x",'))
  await expect('empty body', 400, send('POST', `${a.admin}${CFG}/backends`, ''))
  await expect('unknown field', 422, send('POST', `${a.admin}${CFG}/backends`, { name: 'x', colour: 'blue' }))
  await expect('wrong type', 422, send('POST', `${a.admin}${CFG}/backends`, { name: 'x', retries: 'three' }))
  await expect('missing name', 422, send('POST', `${a.admin}${CFG}/backends`, { balance: { algorithm: 'roundrobin' } }))
  await expect('bad algorithm', 422, send('POST', `${a.admin}${CFG}/backends`, { name: 'x', balance: { algorithm: 'fastest' } }))
  await expect('unsupported algorithm', 422, send('POST', `${a.admin}${CFG}/backends`, { name: 'x', balance: { algorithm: 'uri' } }))
  await expect('bad name', 422, send('POST', `${a.admin}${CFG}/backends`, { name: 'a b' }))
  await expect('several problems', 422, send('POST', `${a.admin}${CFG}/backends`, { name: 7, weight: 1 }))
  await expect('version mismatch', 409, send('POST', `${a.admin}${CFG}/backends?version=1`, { name: 'x' }))
  await expect('bad version', 422, send('POST', `${a.admin}${CFG}/backends?version=abc`, { name: 'x' }))
  await expect('not json', 415, send('POST', `${a.admin}${CFG}/backends`, 'name=x', { 'content-type': 'text/plain' }))
  await expect('server without backend', 422, send('GET', `${a.admin}${CFG}/servers`))
  await expect('server port missing', 422, send('POST', `${a.admin}${CFG}/servers?backend=web`, { name: 's9', address: '127.0.0.1' }))
  await expect('server weight too big', 422, send('POST', `${a.admin}${CFG}/servers?backend=web`, { name: 's9', address: '127.0.0.1', port: 1, weight: 999 }))
  await expect('delete used backend', 400, send('DELETE', `${a.admin}${CFG}/backends/web`))
  await expect('unknown server', 404, send('DELETE', `${a.admin}${CFG}/servers/zz?backend=web`))
  g('config-api-errors.json', errors)
  r = await send('GET', `${a.admin}${CFG}/version`)
  assert.equal(r.body.trim(), '2', 'failed writes do not change the version')

  // with the right version; servers; the change reaches traffic on every worker
  assert.deepEqual(count(await getMany(a.lb.url, 6)), { b1: 6 })
  r = await send('POST', `${a.admin}${CFG}/servers?backend=web&version=2`, { name: 's2', address: '127.0.0.1', port: b2!.port, weight: 1, check: 'disabled' })
  assert.equal(r.status, 201, r.body)
  g('config-api-post-server.json', r.json)
  assert.deepEqual(count(await getMany(a.lb.url, 8)), { b1: 4, b2: 4 })
  r = await send('GET', `${a.admin}${CFG}/servers?backend=web`)
  g('config-api-servers.json', r.json)
  r = await send('PUT', `${a.admin}${CFG}/servers/s1?backend=web`, { name: 's1', address: '127.0.0.1', port: b1!.port, maintenance: 'enabled' })
  assert.equal(r.status, 200, r.body)
  assert.deepEqual(count(await getMany(a.lb.url, 4)), { b2: 4 })
  r = await send('PUT', `${a.admin}${CFG}/backends/web`, { name: 'web', balance: { algorithm: 'leastconn' } })
  assert.equal(r.status, 200, r.body)
  assert.equal((r.json as { balance: { algorithm: string } }).balance.algorithm, 'leastconn')
  r = await send('GET', `${a.admin}${CFG}/servers?backend=web`)
  assert.equal((r.json as { data: unknown[] }).data.length, 2, 'PUT of a backend keeps its servers')
  r = await send('GET', `${a.admin}/v2/services/lb/runtime/servers?backend=web`)
  assert.deepEqual((r.json as Array<{ name: string, admin_state: string }>).map((s) => [s.name, s.admin_state]), [['s1', 'maint'], ['s2', 'ready']])

  // a slow request in flight while the config changes finishes normally
  const slow = await startBackend('slow', (_req, res) => { setTimeout(() => res.end('slow\n'), 700) })
  t.after(() => slow.close())
  r = await send('POST', `${a.admin}${CFG}/servers?backend=api`, { name: 'x1', address: '127.0.0.1', port: slow.port })
  assert.equal(r.status, 201)
  const seen = b2!.requests.length
  const inflight = getMany(a.lb.url, 1)
  await waitFor(() => b2!.requests.length > seen, 'the request to reach b2')
  r = await send('DELETE', `${a.admin}${CFG}/backends/api`)
  assert.equal(r.status, 204)
  assert.deepEqual(await inflight, ['b2'])

  // TOML + overlay after SIGHUP: the overlay survives a reload
  const version = Number((await send('GET', `${a.admin}${CFG}/version`)).body)
  await reloadApplied(a.lb)
  assert.deepEqual(count(await getMany(a.lb.url, 4)), { b2: 4 }, 'API changes survive SIGHUP')

  // persistence: restart, same state
  const state = JSON.parse(readFileSync(join(a.lb.dir, 'run', 'config-api.json'), 'utf8')) as { version: number }
  assert.equal(state.version, version)
  await a.lb.stop()
  const a2 = await restartLb(a)
  t.after(() => a2.lb.stop())
  r = await send('GET', `${a2.admin}${CFG}/servers?backend=web`)
  assert.equal(r.headers['configuration-version'], String(version))
  assert.deepEqual((r.json as { data: Array<{ name: string, maintenance: string }> }).data.map((s) => [s.name, s.maintenance]), [['s1', 'enabled'], ['s2', 'disabled']])
  assert.deepEqual(count(await getMany(a2.lb.url, 4)), { b2: 4 })
  assert.equal(readFileSync(a.lb.file, 'utf8').includes('s2'), false, 'the hand-written TOML is never rewritten')
})

test('config API: concurrent writers with and without version', async (t) => {
  const [b1] = await backends(1)
  const a = await startAdminLb(simpleConfig([b1!.address]))
  t.after(async () => { await a.lb.stop(); await b1!.close() })
  const N = 20
  const rs = await Promise.all(Array.from({ length: N }, (_, i) => send('POST', `${a.admin}${CFG}/backends`, { name: `be${i}`, balance: { algorithm: 'roundrobin' } })))
  assert.deepEqual(rs.map((r) => r.status), new Array(N).fill(201), 'writes without version all succeed, one after another')
  assert.deepEqual(rs.map((r) => Number(r.headers['configuration-version'])).sort((x, y) => x - y), Array.from({ length: N }, (_, i) => i + 2))
  const v = Number((await send('GET', `${a.admin}${CFG}/version`)).body)
  assert.equal(v, N + 1)
  const racers = await Promise.all(Array.from({ length: 8 }, (_, i) => send('POST', `${a.admin}${CFG}/backends?version=${v}`, { name: `race${i}` })))
  assert.equal(racers.filter((r) => r.status === 201).length, 1, 'with the same version exactly one writer wins')
  assert.equal(racers.filter((r) => r.status === 409).length, 7)
  for (const r of racers.filter((x) => x.status === 409)) assert.match((r.json as { message: string }).message, /^version mismatch: version in configuration file is \d+, given version is \d+$/)
  const list = await send('GET', `${a.admin}${CFG}/backends`)
  assert.equal((list.json as { data: unknown[] }).data.length, 1 + N + 1)
})

test('config API: authentication, and a non-loopback address without it is refused', async (t) => {
  const [b1] = await backends(1)
  // bcrypt of "secret", cost 4 (fast in tests)
  const hash = '$2b$04$PNeEMYd/oGcEvX4PAXeplOFxXvAF3purXPVU5TRugbpeskqhm4OTa'
  const a = await startAdminLb(simpleConfig([b1!.address]), {
    admin: `users = ["admin:${hash}"]\ntokens = ["0123456789abcdef-token"]`,
    dashboard: 'api = true\nmetrics = true\ninsecure = false',
  })
  t.after(async () => { await a.lb.stop(); await b1!.close() })
  let r = await send('GET', `${a.admin}${CFG}/backends`)
  assert.equal(r.status, 401)
  assert.match(String(r.headers['www-authenticate']), /^Basic realm=/)
  r = await send('GET', `${a.admin}${CFG}/backends`, undefined, { authorization: 'Basic ' + Buffer.from('admin:wrong').toString('base64') })
  assert.equal(r.status, 401)
  r = await send('GET', `${a.admin}${CFG}/backends`, undefined, { authorization: 'Basic ' + Buffer.from('admin:secret').toString('base64') })
  assert.equal(r.status, 200)
  r = await send('GET', `${a.admin}${CFG}/backends`, undefined, { authorization: 'Bearer 0123456789abcdef-token' })
  assert.equal(r.status, 200)
  // the dashboard listener is not insecure: the same credentials are required there
  assert.equal((await request(`${a.dash}/api/http/routers`)).status, 401)
  assert.equal((await request(`${a.dash}/metrics`)).status, 401)
  assert.equal((await request(`${a.dash}/api/http/routers`, { headers: { authorization: 'Bearer 0123456789abcdef-token' } })).status, 200)

  // `lb check` refuses an unauthenticated admin listener on a non-loopback address, and a dashboard needing missing credentials
  const file = join(a.lb.dir, 'open.toml')
  /** `lb check` of `text`: its stderr ('' when the file is valid) */
  const check = (text: string): string => {
    writeFileSync(file, text)
    try {
      execFileSync(process.execPath, [CLI, 'check', '-c', file], { encoding: 'utf8', stdio: 'pipe' })
      return ''
    } catch (err) {
      return String((err as { stderr: string }).stderr)
    }
  }
  const base = simpleConfig(['127.0.0.1:1']).replace('{{PORT}}', '1')
  let out = check(`${base}\n[admin]\nenabled = true\naddress = "0.0.0.0:5555"\n[dashboard]\napi = true\n`)
  assert.match(out, /admin\.address: 0\.0\.0\.0 is not a loopback address and \[admin\] has no users or tokens/)
  assert.match(out, /dashboard: authentication is required \(insecure = false\) but \[admin\] has no users or tokens/)
  out = check(`${base}\n[admin]\nusers = ["admin:plaintext"]\n`)
  assert.match(out, /admin\.users\[0\]: expected "user:hash" with a bcrypt \(\$2y\$\.\.\.\) or \{SHA\} hash, found "admin:<9 characters>"/)
  assert.doesNotMatch(out, /plaintext/, 'the password is not echoed')
  // a bcrypt hash whose cost bcrypt cannot use (4-31) is refused here, not at the first login
  out = check(`${base}\n[admin]\nusers = ["admin:$2b$99$${'a'.repeat(53)}"]\n`)
  assert.match(out, /admin\.users\[0\]: expected "user:hash" with a bcrypt/)
})
