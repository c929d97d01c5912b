// oidc sessions end at logout, and lb's session cookie stays in lb: a real lb
// (2 workers) in front of a raw backend that records the bytes it gets, a real
// provider (oidc-provider). A copy of the cookie taken before the logout is
// refused on every worker at once and after a restart; the Cookie header the
// backend gets has lb's cookies taken out and every other cookie as sent; a
// full revocation table forgets nothing (it moves its epoch instead).
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { type Binding, CookieSealer, withoutCookies } from '../../plugins/oidc-cookie.js'
import { type AdminLb, startAdminLb, restartLb } from '../admin/util.js'
import { type RawBackend, OK, exchange, startRawBackend } from '../e2e/raw-http.js'
import { metric } from '../cluster/nodes.js'
import { freePort, request, sleep } from '../helpers.js'
import { type Idp, COOKIE_KEY, Client, everyWorker, secrets, startIdp } from './oidc-idp.js'
import { mwConfig } from './setup.js'

test('lb\'s cookies come out of a Cookie header; every other cookie stays as sent', () => {
  const cases: Array<[string, string]> = [
    ['a=1; _lb_oidc=v1.x; b=2', 'a=1; b=2'],
    ['_lb_oidc=v1.x; a=1', 'a=1'],
    ['a=1; _lb_oidc=v1.x', 'a=1'],
    ['a=1;_lb_oidc=v1.x;b=2', 'a=1;b=2'],
    ['_lb_oidc=v1.x', ''],
    ['_lb_oidc=v1.x; _lb_oidc_login=v1.y', ''],
    ['a=1; _lb_oidc=v1.x; _lb_oidc=v1.z; c=3;', 'a=1; c=3;'],
    // names alike are other cookies: whole names only
    ['x_lb_oidc=k; _lb_oidc2=k; _lb_oidcx=k; _lb_oidc=v1.x; lb_oidc=k', 'x_lb_oidc=k; _lb_oidc2=k; _lb_oidcx=k; lb_oidc=k'],
    ['a=_lb_oidc=1', 'a=_lb_oidc=1'],
    ['a=1;   b=2', 'a=1;   b=2'],
  ]
  for (const [header, want] of cases) assert.equal(withoutCookies(header, '_lb_oidc', '_lb_oidc_login'), want, header)
  const untouched = 'a=1; b=2'
  assert.equal(withoutCookies(untouched, '_lb_oidc', '_lb_oidc_login'), untouched)
})

describe('oidc logout and lb\'s cookies through the balancer (2 workers)', () => {
  let backend: RawBackend, a: AdminLb, idp: Idp, issuer: string
  const lbUrl = (): string => a.lb.url
  before(async () => {
    backend = await startRawBackend(() => OK)
    const idpPort = await freePort()
    issuer = `http://127.0.0.1:${idpPort}`
    const s = secrets()
    a = await startAdminLb(mwConfig(backend.address, `
[middlewares.sso]
type = "oidc"
issuer = "${issuer}"
${s.toml}
skip_paths = ["/public"]

[middlewares.keep]
type = "oidc"
issuer = "${issuer}"
${s.toml}
forward_session_cookie = true
`, { '/keep/': ['keep'], '/': ['sso'] }), { socket: false })
    idp = await startIdp({ lb: lbUrl(), port: idpPort })
    await everyWorker(`${lbUrl()}/`, 302)
  })
  after(async () => { await a.lb.stop(); await idp.close(); await backend.close() })

  const login = async (user: string): Promise<{ c: Client, cookie: string }> => {
    const c = new Client()
    const page = await c.go(`${lbUrl()}/app`)
    assert.ok(page.url.startsWith(issuer), page.url)
    const r = await c.signIn(page, user)
    assert.equal(r.status, 200, r.body)
    return { c, cookie: c.cookie(lbUrl(), '_lb_oidc')! }
  }
  /** `n` requests with the cookie, each on a connection of its own (the kernel spreads them over both workers) */
  const statuses = async (cookie: string, n: number, headers: Record<string, string> = {}): Promise<number[]> =>
    Promise.all(Array.from({ length: n }, async () => (await request(`${lbUrl()}/app`, { headers: { cookie: `_lb_oidc=${cookie}`, ...headers } })).status))

  test('logout revokes the session on every worker: a copy of the cookie taken before is refused at once', async () => {
    const ann = await login('ann')
    const other = await login('ann') // the same user's other session (another browser) is not this one
    // both workers have the session cached
    assert.deepEqual(new Set(await statuses(ann.cookie, 20)), new Set([200]))
    const out = await ann.c.fetch(`${lbUrl()}/oauth2/sign_out`)
    assert.equal(out.status, 302)
    assert.equal(ann.c.cookie(lbUrl(), '_lb_oidc'), undefined, 'the browser\'s cookie is cleared')
    // the copy, right after, on fresh connections to both workers: a browser is sent to log in, an API client gets 401
    assert.deepEqual(new Set(await statuses(ann.cookie, 20)), new Set([302]))
    assert.deepEqual(new Set(await statuses(ann.cookie, 10, { accept: 'application/json' })), new Set([401]))
    assert.deepEqual(new Set(await statuses(other.cookie, 10)), new Set([200]), 'the other session goes on')
    assert.equal(await metric(a, 'lb_session_revocations'), 1)
    await a.lb.logMatching(/"msg":"signed out".*"user":"ann@example.com"/)
  })

  test('the backend never gets lb\'s cookies; every other cookie reaches it as sent', async () => {
    const { cookie } = await login('bob')
    const login2 = new CookieSealer(COOKIE_KEY, '_lb_oidc', sso(issuer)).sealLogin({ s: 's', n: 'n', v: 'v', r: '/', e: Date.now() + 60_000 })
    const cookiesAt = async (path: string, lines: string[]): Promise<string[]> => {
      const before = backend.heads.length
      const r = await exchange(a.lb.port, `GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n${lines.map((l) => `cookie: ${l}\r\n`).join('')}\r\n`)
      assert.equal(r.status, 200, r.text)
      assert.equal(backend.heads.length, before + 1)
      return [...backend.heads[before]!.matchAll(/^cookie: (.*)$/gim)].map((m) => m[1]!)
    }
    assert.deepEqual(await cookiesAt('/app', [`_ga=GA1.1.1; _lb_oidc=${cookie}; theme=dark;  x_lb_oidc=keep; _lb_oidc2=keep; _lb_oidc_login=${login2}; lang=en`]),
      ['_ga=GA1.1.1; theme=dark;  x_lb_oidc=keep; _lb_oidc2=keep; lang=en'])
    assert.deepEqual(await cookiesAt('/app', [`_lb_oidc=${cookie}`]), [], 'nothing else: no Cookie header at all')
    assert.deepEqual(await cookiesAt('/app', [`a=1; _lb_oidc=${cookie}`, 'b=2; _lb_oidc=stale']), ['a=1', 'b=2'], 'two Cookie lines, each cleaned, in order')
    // a path served without login: lb's cookies come out too
    assert.deepEqual(await cookiesAt('/public/x', [`a=1; _lb_oidc=${cookie}`]), ['a=1'])
    // forward_session_cookie = true keeps them as sent
    assert.deepEqual(await cookiesAt('/keep/x', [`a=1; _lb_oidc=${cookie}; b=2`]), [`a=1; _lb_oidc=${cookie}; b=2`])
  })

  test('a restart keeps the revocations (the state folder)', async () => {
    const carl = await login('carl')
    assert.equal((await carl.c.fetch(`${lbUrl()}/oauth2/sign_out`)).status, 302)
    await a.lb.stop()
    a = await restartLb(a)
    assert.deepEqual(new Set(await statuses(carl.cookie, 10, { accept: 'application/json' })), new Set([401]))
  })
})

test('a full revocation table forgets no revocation: every session born until then is refused, and it is logged', { timeout: 60_000 }, async (t) => {
  const backend = await startRawBackend(() => OK)
  const issuer = `http://127.0.0.1:${await freePort()}` // never started: sessions are sealed by the test
  const a = await startAdminLb('[limits]\nsession_revocations = 64\n\n' + mwConfig(backend.address, `[middlewares.sso]\ntype = "oidc"\nissuer = "${issuer}"\n${secrets().toml}\n`, { '/': ['sso'] }), { socket: false })
  t.after(async () => { await a.lb.stop(); await backend.close() })
  const sealer = new CookieSealer(COOKIE_KEY, '_lb_oidc', sso(issuer))
  const session = (): string => sealer.sealSession({ i: randomBytes(16).toString('base64url'), b: Date.now(), u: 'u', h: [], e: Date.now() + 3_600_000, t: Date.now() + 3_600_000, r: '' })
  const status = async (cookie: string): Promise<number> => (await request(`${a.lb.url}/app`, { headers: { cookie: `_lb_oidc=${cookie}` } })).status
  const bystander = session()
  assert.equal(await status(bystander), 200)
  const out: string[] = []
  // the worker moves the epoch in shared memory before it answers the sign-out; the log line comes later, from the
  // control plane, so the loop asks the counter (read from shared memory) whether the table was full
  for (let i = 0; i < 200 && await metric(a, 'lb_session_revocation_resets_total') === 0; i++) {
    const s = session()
    assert.equal(await status(s), 200)
    assert.equal((await request(`${a.lb.url}/oauth2/sign_out`, { headers: { cookie: `_lb_oidc=${s}` } })).status, 302)
    out.push(s)
  }
  await a.lb.logMatching(/"msg":"the session revocation table of this node was full \(limits\.session_revocations\): every session born until \S+ is refused and its user logs in again","code":"LB_ERR_REVOCATIONS_FULL"/)
  assert.ok(out.length > 50, `${out.length} logouts filled 64 entries`)
  for (const s of out) assert.equal(await status(s), 503, 'every logged out session is still refused (503: no provider to send it to)')
  assert.equal(await status(bystander), 503, 'a session born before: refused too, its user logs in again')
  assert.equal(await metric(a, 'lb_session_revocation_resets_total'), 1)
  await sleep(1100) // the epoch is in whole seconds
  assert.equal(await status(session()), 200, 'a session born after passes')
})

/** what the middlewares above bind their cookies to (plugins/oidc-cookie.ts; default forward_claims) */
function sso (issuer: string): Binding {
  return { issuer, clientId: 'lb', emailDomains: [], claimMatch: [], forward: [['sub', 'x-auth-request-user'], ['email', 'x-auth-request-email']] }
}
