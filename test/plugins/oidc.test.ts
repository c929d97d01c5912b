// oidc through the real balancer against a real OpenID provider (oidc-provider
// on loopback, test/plugins/oidc-idp.ts), driven by a plain HTTP client that
// follows redirects and posts the login form: login and forwarded claims,
// cookies tampered, expired or sealed with another key, the callback's checks
// (state, replayed code, nonce, a code for another client), allowed domains and
// claim rules, 401 for API requests, skip paths, bearer tokens, logout, the
// dashboard status, and config errors.
import { strict as assert } from 'node:assert'
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { refusal } from '../../plugins/oidc-claims.js'
import type { OidcConf } from '../../plugins/oidc-config.js'
import { type Binding, CookieSealer } from '../../plugins/oidc-cookie.js'
import { type Backend, CLI, freePort, request, sleep, tempDir } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { type Idp, COOKIE_KEY, Client, echo, secrets, seen, startIdp } from './oidc-idp.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'

describe('oidc config validation', () => {
  test('the cookie secret must be 32 bytes: lb check refuses another size with a clear message', () => {
    const dir = tempDir('lb-oidc-')
    writeFileSync(join(dir, 'short'), 'x'.repeat(31))
    writeFileSync(join(dir, 'cs'), 'sekrit')
    const body = (key: string): string => `type = "oidc"\nissuer = "https://idp.example.com"\nclient_id = "lb"\nclient_secret_file = "${join(dir, 'cs')}"\ncookie_secret_file = "${key}"`
    const file = join(dir, 'lb.toml')
    writeFileSync(file, oneMiddleware(body(join(dir, 'short'))).replace('{{PORT}}', '1'))
    let out = ''
    try {
      execFileSync(process.execPath, [CLI, 'check', '-c', file], { encoding: 'utf8', stdio: 'pipe' })
      assert.fail('lb check accepted a 31-byte cookie secret')
    } catch (err) {
      out = String((err as { stderr?: string }).stderr) + String((err as { stdout?: string }).stdout)
    }
    assert.match(out, /middlewares\.m\.cookie_secret_file: the cookie secret must be exactly 32 bytes \(or their base64\), found 31 bytes/)
    assert.doesNotMatch(out, /sekrit/)
    assert.match(problems(oneMiddleware(body(join(dir, 'missing')))), /cookie_secret_file: cannot read .*missing: ENOENT/)
  })

  test('issuer, client secret, paths and scopes are checked', () => {
    const msg = problems(oneMiddleware('type = "oidc"\nissuer = "http://idp.example.com"\nclient_id = "lb"\ncookie_secret_file = "/nonexistent"\nscopes = ["email"]\nredirect_path = "cb"'))
    assert.match(msg, /middlewares\.m\.issuer: http:\/\/idp\.example\.com: plain http is accepted only for a provider on loopback; use https:\/\//)
    assert.match(msg, /middlewares\.m\.client_secret: expected the client secret \(client_secret or client_secret_file\), found nothing/)
    assert.match(msg, /middlewares\.m\.scopes: must include "openid"/)
    assert.match(msg, /middlewares\.m\.redirect_path: expected a path starting with "\/"/)
  })
})

test('allowed_email_domains: only a verified address with one "@" in an allowed domain', () => {
  const conf = { emailDomains: ['corp.test'], claimMatch: [] } as unknown as OidcConf
  const verdict = (claims: Record<string, unknown>): string => refusal(conf, claims)
  assert.equal(verdict({ email: 'ann@corp.test', email_verified: true }), '')
  assert.equal(verdict({ email: 'ann@corp.test', email_verified: 'true' }), '')
  assert.match(verdict({ email: 'ann@corp.test' }), /not verified/, 'no email_verified (many access tokens) is not a yes')
  assert.match(verdict({ email: 'ann@corp.test', email_verified: 'false' }), /not verified/)
  assert.match(verdict({ email: 'corp.test', email_verified: true }), /not an address with one "@"/)
  assert.match(verdict({ email: 'a@b@corp.test', email_verified: true }), /not an address with one "@"/)
  assert.match(verdict({ email: 'ann@gmail.com', email_verified: true }), /not among allowed_email_domains/)
})

describe('oidc through the balancer', () => {
  let backend: Backend, a: AdminLb, idp: Idp, lbUrl: string, issuer: string
  /** what the sso middleware below binds its cookies to (plugins/oidc-cookie.ts) */
  const sso = (): Binding => ({ issuer, clientId: 'lb', emailDomains: [], claimMatch: [], forward: [['sub', 'x-auth-request-user'], ['email', 'x-auth-request-email'], ['groups', 'x-auth-request-groups']] })
  before(async () => {
    backend = await echo()
    const s = secrets()
    const idpPort = await freePort()
    issuer = `http://127.0.0.1:${idpPort}`
    a = await startAdminLb(mwConfig(backend.address, `
[middlewares.sso]
type = "oidc"
issuer = "${issuer}"
${s.toml}
skip_paths = ["/public"]
[middlewares.sso.forward_claims]
sub = "X-Auth-Request-User"
email = "X-Auth-Request-Email"
groups = "X-Auth-Request-Groups"

[middlewares.admins]
type = "oidc"
issuer = "${issuer}"
${s.toml}
cookie_name = "_lb_admin"
redirect_path = "/admin/oauth2/callback"
allowed_email_domains = ["corp.test"]
claim_match = { groups = "admins" }
`, { '/admin/': ['admins'], '/': ['sso'] }), { socket: false })
    lbUrl = a.lb.url
    // the provider starts after lb (its redirect URIs name lb's port): the middleware's first discovery fails and is retried
    idp = await startIdp({ lb: lbUrl, port: idpPort })
    // every worker loads the metadata itself; the dashboard shows "enabled" once all have (the worst of the workers)
    for (const end = Date.now() + 15_000; ;) {
      const r = await request(`${a.dash}/api/http/middlewares`)
      if ((JSON.parse(r.body) as Array<{ status: string }>).every((m) => m.status === 'enabled')) break
      if (Date.now() > end) assert.fail(`the middlewares never loaded the provider: ${r.body}`)
      await sleep(100)
    }
  })
  after(async () => { await a.lb.stop(); await idp.close(); await backend.close() })

  const login = async (c: Client, path: string, user: string): Promise<{ status: number, body: string }> => {
    const page = await c.go(`${lbUrl}${path}`)
    assert.equal(page.status, 200, `login page: ${page.url}`)
    assert.ok(page.url.startsWith(issuer), page.url)
    return c.signIn(page, user)
  }

  test('login: the browser comes back to its page, the backend sees the claims, client-sent copies never pass', async () => {
    const c = new Client()
    const r = await login(c, '/app?x=1', 'ann')
    assert.equal(r.status, 200, r.body)
    const body = JSON.parse(r.body) as { path: string, headers: Record<string, string> }
    assert.equal(body.path, '/app?x=1')
    assert.equal(body.headers['x-auth-request-user'], 'ann')
    assert.equal(body.headers['x-auth-request-email'], 'ann@example.com')
    assert.equal(body.headers['x-auth-request-groups'], '["staff"]')
    assert.ok(c.cookie(lbUrl, '_lb_oidc') !== undefined)
    assert.equal(c.cookie(lbUrl, '_lb_oidc_login'), undefined, 'the login cookie is cleared')
    const forged = await c.fetch(`${lbUrl}/app`, { headers: { 'x-auth-request-user': 'root', 'x-auth-request-groups': 'admins' } })
    assert.equal(forged.status, 200)
    assert.equal(seen(forged.body)['x-auth-request-user'], 'ann')
    assert.equal(seen(forged.body)['x-auth-request-groups'], '["staff"]')
  })

  test('the redirect to the provider: PKCE, state, nonce; the login cookie is HttpOnly and SameSite=Lax', async () => {
    const r = await new Client().fetch(`${lbUrl}/x`)
    assert.equal(r.status, 302)
    const to = new URL(r.headers.get('location')!)
    assert.equal(to.origin, issuer)
    assert.equal(to.searchParams.get('client_id'), 'lb')
    assert.equal(to.searchParams.get('redirect_uri'), `${lbUrl}/oauth2/callback`)
    assert.equal(to.searchParams.get('code_challenge_method'), 'S256')
    assert.ok((to.searchParams.get('state') ?? '').length >= 32 && (to.searchParams.get('nonce') ?? '').length >= 32)
    assert.equal(to.searchParams.get('scope'), 'openid profile email')
    const cookie = r.headers.getSetCookie()[0]!
    assert.match(cookie, /^_lb_oidc_login=v1\.[\w-]+; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax$/)
    // where the browser returns after the login: a path on this host, never one a browser reads as another host
    const sealer = new CookieSealer(COOKIE_KEY, '_lb_oidc', sso())
    for (const path of ['/app?x=1', '/\\evil.example/x', '//evil.example/x']) {
      const raw = await request(`${lbUrl}${path}`)
      assert.equal(raw.status, 302, path)
      const back = sealer.openLogin(String(raw.headers['set-cookie']).split(';')[0]!.slice('_lb_oidc_login='.length))?.r ?? ''
      assert.match(back, /^\/(?![/\\])/, `${path} returns to ${back}`)
      if (path === '/app?x=1') assert.equal(back, path)
    }
  })

  test('API requests get 401 instead of a redirect; skip paths pass without login', async () => {
    for (const h of [{ accept: 'application/json' }, { 'x-requested-with': 'XMLHttpRequest' }]) {
      const r = await request(`${lbUrl}/api/x`, { headers: h })
      assert.equal(r.status, 401, JSON.stringify(h))
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="oidc"')
    }
    // skip_paths = ["/public"] by whole segments: /public and /public/x, not /publicity
    assert.equal((await request(`${lbUrl}/publicity`, { headers: { accept: 'application/json' } })).status, 401)
    assert.equal((await request(`${lbUrl}/public`)).status, 200)
    const r = await request(`${lbUrl}/public/a.css`, { headers: { 'x-auth-request-user': 'root', 'x-auth-request_user': 'root', x_auth_request_email: 'ceo@corp.test' } })
    assert.equal(r.status, 200)
    const got = seen(r.body)
    assert.deepEqual([got['x-auth-request-user'], got['x-auth-request_user'], got.x_auth_request_email], [undefined, undefined, undefined], 'underscore copies too (CGI reads them as the same header)')
  })

  test('session cookies: tampered, expired and sealed with another key are refused', async () => {
    const c = new Client()
    assert.equal((await login(c, '/', 'bob')).status, 200)
    const good = c.cookie(lbUrl, '_lb_oidc')!
    const at = (v: string): Promise<{ status: number, body: string }> => request(`${lbUrl}/app`, { headers: { cookie: `_lb_oidc=${v}` } })
    assert.equal((await at(good)).status, 200)
    const i = Math.floor(good.length / 2)
    const tampered = good.slice(0, i) + (good[i] === 'A' ? 'B' : 'A') + good.slice(i + 1)
    assert.equal((await at(tampered)).status, 302)
    const session = { i: randomBytes(16).toString('base64url'), b: Date.now(), u: 'mallory', h: ['x-auth-request-user', 'mallory'], e: Date.now() + 3_600_000, t: Date.now() + 3_600_000, r: '' }
    const ours = new CookieSealer(COOKIE_KEY, '_lb_oidc', sso())
    const crafted = await at(ours.sealSession(session))
    assert.equal(crafted.status, 200, 'a cookie sealed with the right key passes (the test seals correctly)')
    assert.equal(seen(crafted.body)['x-auth-request-user'], 'mallory')
    const { i: _id, ...idless } = session
    assert.equal((await at(ours.sealSession(idless as typeof session))).status, 302, 'a session without an id (sealed before revocations) cannot be revoked: refused')
    assert.equal((await at(ours.sealSession({ ...session, e: Date.now() - 1000 }))).status, 302, 'expired')
    assert.equal((await at(new CookieSealer(randomBytes(32), '_lb_oidc', sso()).sealSession(session))).status, 302, 'another key')
    assert.equal((await at(new CookieSealer(COOKIE_KEY, '_lb_admin', sso()).sealSession(session))).status, 302, 'another middleware\'s cookie')
    // the same key file and cookie name, but a middleware with other rules or another client: its sessions are not ours
    for (const other of [{ ...sso(), emailDomains: ['gmail.com'] }, { ...sso(), clientId: 'other' }, { ...sso(), forward: [] }]) {
      assert.equal((await at(new CookieSealer(COOKIE_KEY, '_lb_oidc', other).sealSession(session))).status, 302, JSON.stringify(other))
    }
  })

  /** Starts a login, lets the provider sign `user` in, and stops before the callback reaches lb; `edit` may change the authorization URL. */
  const toCallback = async (c: Client, user: string, edit: (u: URL) => void = () => {}): Promise<string> => {
    const r = await c.fetch(`${lbUrl}/app`)
    const auth = new URL(r.headers.get('location')!)
    edit(auth)
    const page = await c.go(auth.href)
    const cb = await c.signIn(page, user, `${lbUrl}/oauth2/callback`)
    assert.ok(cb.url.startsWith(`${lbUrl}/oauth2/callback?`), cb.url)
    return cb.url
  }

  test('the callback refuses a wrong state, a replayed code, a wrong nonce and a code for another client', async () => {
    const c = new Client()
    const cb = new URL(await toCallback(c, 'carol'))
    const flow = c.cookie(lbUrl, '_lb_oidc_login')!
    const wrong = new URL(cb)
    wrong.searchParams.set('state', 'not-the-state')
    let r = await c.fetch(wrong.href)
    assert.equal(r.status, 401)
    assert.match(r.body, /^login refused: .*state/)
    r = await c.fetch(cb.href)
    assert.equal(r.status, 302, r.body)
    c.setCookie(lbUrl, '_lb_oidc_login', flow)
    c.jar.get(lbUrl)!.delete('_lb_oidc')
    r = await c.fetch(cb.href)
    assert.equal(r.status, 401, 'replayed code')
    assert.match(r.body, /^login refused: invalid_grant/)

    const n = new Client()
    r = await n.fetch(await toCallback(n, 'carol', (u) => u.searchParams.set('nonce', 'another-nonce-another-nonce-another-nonce')))
    assert.equal(r.status, 401)
    assert.match(r.body, /^login refused: .*nonce/)

    const o = new Client()
    r = await o.fetch(await toCallback(o, 'carol', (u) => u.searchParams.set('client_id', 'other')))
    assert.equal(r.status, 401)
    assert.match(r.body, /^login refused: invalid_grant/)
    assert.equal(o.cookie(lbUrl, '_lb_oidc'), undefined)
  })

  test('allowed email domains and claim rules', async () => {
    const outsider = new Client()
    let r = await login(outsider, '/admin/x', 'ann')
    assert.equal(r.status, 403)
    assert.match(r.body, /^user ann@example\.com is not allowed here: the email domain example\.com is not among allowed_email_domains/)
    const staff = new Client()
    r = await login(staff, '/admin/x', 'ann@corp.test')
    assert.equal(r.status, 403)
    assert.match(r.body, /claim groups holds none of admins/)
    const admin = new Client()
    r = await login(admin, '/admin/x', 'admin@corp.test')
    assert.equal(r.status, 200, r.body)
    assert.equal(seen(r.body)['x-auth-request-email'], 'admin@corp.test')
  })

  test('logout clears the session and goes through the provider\'s end_session_endpoint', async () => {
    const c = new Client()
    assert.equal((await login(c, '/', 'dave')).status, 200)
    const r = await c.fetch(`${lbUrl}/oauth2/sign_out`)
    assert.equal(r.status, 302)
    const to = new URL(r.headers.get('location')!)
    assert.equal(`${to.origin}${to.pathname}`, `${issuer}/session/end`)
    assert.equal(to.searchParams.get('post_logout_redirect_uri'), `${lbUrl}/`)
    assert.equal(to.searchParams.get('client_id'), 'lb')
    assert.equal(c.cookie(lbUrl, '_lb_oidc'), undefined)
    assert.equal((await c.fetch(`${lbUrl}/app`)).status, 302)
  })

  test('bearer access tokens of the same provider pass; others get 401 invalid_token', async () => {
    const token = await idp.apiToken()
    assert.equal(token.split('.').length, 3, 'a JWT access token')
    let r = await request(`${lbUrl}/app`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
    assert.equal(r.status, 200, r.body)
    r = await request(`${lbUrl}/app`, { headers: { authorization: `Bearer ${token.slice(0, -4)}AAAA`, accept: 'application/json' } })
    assert.equal(r.status, 401)
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="oidc", error="invalid_token"')
  })

  test('requests with a session or a known bearer token never fetch provider metadata or keys', async () => {
    const c = new Client()
    assert.equal((await login(c, '/', 'hank')).status, 200)
    const before = [idp.discoveries(), idp.keySets()]
    for (let i = 0; i < 20; i++) assert.equal((await c.fetch(`${lbUrl}/app/${i}`)).status, 200)
    assert.deepEqual([idp.discoveries(), idp.keySets()], before)
  })

  test('the dashboard API shows the middleware, its status, and no secret', async () => {
    const r = await request(`${a.dash}/api/http/middlewares/sso@file`)
    assert.equal(r.status, 200)
    const m = JSON.parse(r.body) as { status: string, message: string, oidc: Record<string, unknown> }
    assert.equal(m.status, 'enabled')
    assert.match(m.message, new RegExp(`provider metadata loaded from ${issuer} at .*signing keys, RP-initiated logout`))
    assert.equal(m.oidc.issuer, issuer)
    assert.equal(m.oidc.clientSecret, '<redacted>')
    assert.doesNotMatch(r.body, /lb-secret/)
    assert.ok(!r.body.includes(COOKIE_KEY.toString('base64')))
    assert.doesNotMatch(a.lb.log(), /lb-secret/)
  })
})
