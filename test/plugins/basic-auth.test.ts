// basicAuth through the real balancer, with hashes made by the real htpasswd
// (test/fixtures/auth/README.md says how): bcrypt, apr1 MD5 and {SHA}.
import { strict as assert } from 'node:assert'
import { readFileSync } from 'node:fs'
import bcrypt from 'bcryptjs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, ROOT, request, startBackend, startLb, waitFor } from '../helpers.js'
import { burst, mwConfig, oneMiddleware, problems, statuses } from './setup.js'

const AUTH = join(ROOT, 'test', 'fixtures', 'auth')
const USERS = join(AUTH, 'users.htpasswd')
const basic = (user: string, password: string): string => 'Basic ' + Buffer.from(`${user}:${password}`, 'utf8').toString('base64')

describe('basicAuth config validation', () => {
  test('unsupported hashes are refused line by line, without echoing the hash', () => {
    const file = join(AUTH, 'unsupported.htpasswd')
    const msg = problems(oneMiddleware(`type = "basicAuth"\nusers_file = "${file}"`))
    assert.match(msg, new RegExp(`middlewares\\.m\\.users_file: ${file} line 2: user "erin" has a SHA-crypt hash \\(htpasswd -2/-5\\), which is not supported; expected a hash made by htpasswd -B \\(bcrypt \\$2y\\$\\), -m \\(apr1 MD5\\) or -s \\(\\{SHA\\}\\)`))
    assert.match(msg, /line 3: user "frank" has a crypt\(3\) DES hash \(htpasswd -d\), which is not supported/)
    assert.match(msg, /line 4: user "gina" has a plain-text password or an unknown hash \(htpasswd -p is not supported\)/)
    assert.match(msg, /line 5: expected "user:hash" as written by htpasswd/)
    assert.doesNotMatch(msg, /\$5\$|pw$/m)
  })

  test('missing users, unreadable file, duplicates, bad realm', () => {
    assert.match(problems(oneMiddleware('type = "basicAuth"')), /middlewares\.m\.users: expected at least one "user:hash" in users or users_file, found nothing/)
    assert.match(problems(oneMiddleware('type = "basicAuth"\nusers_file = "nope.htpasswd"')),
      /middlewares\.m\.users_file: cannot read \/etc\/lb\/nope\.htpasswd: ENOENT/)
    const line = readFileSync(USERS, 'utf8').split('\n')[0] ?? ''
    assert.match(problems(oneMiddleware(`type = "basicAuth"\nusers = ["${line.replaceAll('$', '\\u0024')}"]\nusers_file = "${USERS}"`)),
      /users_file: .*users\.htpasswd line 1: user "alice" is defined twice/)
    assert.match(problems(oneMiddleware(`type = "basicAuth"\nusers_file = "${USERS}"\nrealm = "a\\"b"`)), /middlewares\.m\.realm: expected printable ASCII without " or \\, found "a\\"b"/)
  })
})

describe('basicAuth through the balancer', () => {
  let backend: Backend, lb: Lb
  before(async () => {
    backend = await startBackend('web', (req, res) => {
      req.resume()
      req.on('end', () => res.end(JSON.stringify(req.headers)))
    })
    const dave = readFileSync(USERS, 'utf8').split('\n').find((l) => l.startsWith('dave:'))!
    lb = await startLb(mwConfig(backend.address, `
[middlewares.file-users]
type = "basicAuth"
users_file = "${USERS}"
realm = "staff area"

[middlewares.inline]
type = "basicAuth"
users = ["${dave.replace('$2y$', '$2b$')}"]
remove_header = true
header_field = "X-Auth-User"
`, { '/inline': ['inline'], '/': ['file-users'] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('no credentials: 401 with the Basic challenge and realm', async () => {
    const r = await request(`${lb.url}/x`)
    assert.equal(r.status, 401)
    assert.equal(r.headers['www-authenticate'], 'Basic realm="staff area"')
    assert.equal(r.body, 'Unauthorized\n')
    assert.equal(backend.requests.length, 0)
  })

  test('bcrypt ($2y$), apr1 and {SHA} hashes from htpasswd accept the right password (UTF-8 too)', async () => {
    for (const [user, pw] of [['alice', 'wonder-land'], ['bob', 'b0b:has:colons'], ['carol', 'sésame ouvre-toi']]) {
      const r = await request(`${lb.url}/x`, { headers: { authorization: basic(user!, pw!) } })
      assert.equal(r.status, 200, user)
      // without remove_header the Authorization header reaches the upstream
      assert.equal(JSON.parse(r.body).authorization, basic(user!, pw!))
    }
  })

  test('wrong password, unknown user, malformed header: 401', async () => {
    for (const auth of [basic('alice', 'wonder-lan'), basic('bob', 'b0b'), basic('carol', 'sesame ouvre-toi'), basic('mallory', 'x'),
      'Basic !!!', 'Basic ' + Buffer.from('no-colon').toString('base64'), 'Bearer abc', 'Basic']) {
      const r = await request(`${lb.url}/x`, { headers: { authorization: auth } })
      assert.equal(r.status, 401, auth)
      assert.equal(r.headers['www-authenticate'], 'Basic realm="staff area"')
    }
  })

  test('the scheme name is case-insensitive', async () => {
    const r = await request(`${lb.url}/x`, { headers: { authorization: basic('alice', 'wonder-land').replace('Basic', 'bAsIc') } })
    assert.equal(r.status, 200)
  })

  test('inline $2b$ user; remove_header strips Authorization; header_field carries the user and cannot be forged', async () => {
    const r = await request(`${lb.url}/inline`, { headers: { authorization: basic('dave', 'x'), 'x-auth-user': 'admin' } })
    assert.equal(r.status, 200)
    const seen = JSON.parse(r.body)
    assert.equal(seen.authorization, undefined)
    assert.equal(seen['x-auth-user'], 'dave')
    assert.equal((await request(`${lb.url}/inline`, { headers: { authorization: basic('alice', 'wonder-land') } })).status, 401)
  })

  test('many concurrent requests with the same bcrypt credentials on fresh connections all pass', async () => {
    const rs = await burst(`${lb.url}/x`, 40, 20, { headers: { authorization: basic('alice', 'wonder-land') } })
    assert.deepEqual(statuses(rs), { 200: 40 })
  })
})

describe('basicAuth under a flood of new credentials (bcrypt on a thread of its own)', () => {
  let backend: Backend, lb: Lb
  before(async () => {
    backend = await startBackend('web')
    // cost 12: hundreds of milliseconds a check, as a real deployment's hashes cost tens; one worker takes every request
    lb = await startLb('[global]\nworkers = 1\n' + mwConfig(backend.address, `
[middlewares.slow]
type = "basicAuth"
users = ["eve:${bcrypt.hashSync('right', 12)}"]
[middlewares.cheap]
type = "basicAuth"
users = ["eve:${bcrypt.hashSync('right', 10)}"]
`, { '/private': ['slow'], '/cheap': ['cheap'], '/public': [] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('while wrong passwords are checked, the same worker answers other requests', async () => {
    // 8 checks of a few hundred ms each: seconds of CPU, which ran on the worker's own loop before
    let done = 0
    const checks = Array.from({ length: 8 }, (_, i) => request(`${lb.url}/private`, { headers: { authorization: basic('eve', `wrong-${i}`) } }).then((r) => { done++; return r }))
    await waitFor(() => done >= 1, 'the first check to end (all 8 have reached lb by then)', 10_000, 5)
    const pub = await request(`${lb.url}/public`)
    const finishedBefore = done
    assert.equal(pub.status, 200)
    assert.ok(finishedBefore <= 3, `the public request was answered after ${finishedBefore} of 8 password checks`)
    assert.deepEqual(statuses(await Promise.all(checks)), { 401: 8 })
    assert.equal((await request(`${lb.url}/private`, { headers: { authorization: basic('eve', 'right') } })).status, 200)
  })

  test('past 64 waiting checks, new credentials get 503 with Retry-After and the reason; checked ones still pass', async () => {
    const ok = { headers: { authorization: basic('eve', 'right') } }
    assert.equal((await request(`${lb.url}/cheap`, ok)).status, 200) // checked once: cached from now on
    // distinct passwords: the same credentials in flight share one check
    const rs = await Promise.all(Array.from({ length: 100 }, (_, i) => request(`${lb.url}/cheap`, { headers: { authorization: basic('eve', `guess-${i}`) } })))
    const busy = rs.filter((r) => r.status === 503)
    assert.equal(busy.length + rs.filter((r) => r.status === 401).length, 100, JSON.stringify(statuses(rs)))
    assert.ok(busy.length > 0, JSON.stringify(statuses(rs)))
    assert.equal(busy[0]!.headers['retry-after'], '1')
    assert.match(busy[0]!.body, /too many password checks in progress \(64 waiting\)/)
    assert.equal((await request(`${lb.url}/cheap`, ok)).status, 200)
  })
})
