// oidc over time, against a real provider (oidc-provider) on loopback: a
// provider down when lb starts (logins answer 503 and the dashboard says why;
// lb retries and logs in once it is up), tokens refreshed before they expire
// (a new session cookie, the session carrying on), and a provider that goes
// away in the middle of a login (502 at the callback; sessions carry on), and
// a provider that stops once loaded (browsers and API clients alike get 503).
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, freePort, request, sleep, startLb } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { type Idp, Client, echo, everyWorker, secrets, seen, startIdp } from './oidc-idp.js'
import { mwConfig } from './setup.js'

describe('oidc when the provider is away, and token refresh', () => {
  let backend: Backend; let a: AdminLb; let idp: Idp | null = null; let lbUrl: string; let issuer: string; let idpPort: number
  before(async () => {
    backend = await echo()
    idpPort = await freePort()
    issuer = `http://127.0.0.1:${idpPort}`
    a = await startAdminLb(mwConfig(backend.address, `
[middlewares.sso]
type = "oidc"
issuer = "${issuer}"
${secrets().toml}
refresh_before = "2s"
timeout = "1s"
`, { '/': ['sso'] }), { socket: false })
    lbUrl = a.lb.url
  })
  after(async () => { await a.lb.stop(); await idp?.close(); await backend.close() })

  const status = async (): Promise<{ status: string, message: string }> =>
    JSON.parse((await request(`${a.dash}/api/http/middlewares/sso@file`)).body) as { status: string, message: string }

  test('provider down at start: 503 with the reason, a warning on the dashboard, then logins once it is up', async () => {
    const r = await request(`${lbUrl}/app`)
    assert.equal(r.status, 503)
    assert.match(r.body, new RegExp(`^identity provider ${issuer} is unavailable \\(.*(ECONNREFUSED|fetch failed).*\\); try again later`))
    assert.equal(r.headers['retry-after'], '5')
    // an API client (JSON, XHR) gets the same 503 as a browser, not a 401 that would send it to log in again
    for (const h of [{ accept: 'application/json' }, { 'x-requested-with': 'XMLHttpRequest' }]) {
      const api = await request(`${lbUrl}/app`, { headers: h })
      assert.equal(api.status, 503, JSON.stringify(h))
      assert.match(api.body, new RegExp(`^identity provider ${issuer} is unavailable \\(`))
      assert.equal(api.headers['retry-after'], '5')
    }
    // every worker's first discovery has failed (until then a worker reports that it is loading)
    for (const end = Date.now() + 5000; !/unavailable/.test((await status()).message) && Date.now() < end;) await sleep(50)
    const s = await status()
    assert.equal(s.status, 'warning')
    assert.match(s.message, new RegExp(`provider ${issuer} unavailable: .*; logins answer 503 until it loads \\(sessions carry on\\); retrying in \\d+s`))
    idp = await startIdp({ lb: lbUrl, port: idpPort, accessTtl: 3 })
    let last = 0
    for (const end = Date.now() + 20_000; last !== 302 && Date.now() < end; await sleep(100)) last = (await request(`${lbUrl}/app`)).status
    assert.equal(last, 302, 'logins work once the provider is up')
    // the worst of the workers: each retries on its own back-off (1 s doubling)
    for (const end = Date.now() + 20_000; (await status()).status !== 'enabled' && Date.now() < end;) await sleep(50)
    assert.equal((await status()).status, 'enabled')
    assert.equal(a.lb.proc.exitCode, null)
  })

  let session: Client
  test('tokens are refreshed before they expire: a new cookie, the same user', async () => {
    assert.ok(idp !== null)
    session = new Client()
    const page = await session.go(`${lbUrl}/app`)
    const r = await session.signIn(page, 'erin')
    assert.equal(r.status, 200, r.body)
    const first = session.cookie(lbUrl, '_lb_oidc')!
    assert.ok(!idp.grants.includes('refresh_token'))
    // access tokens live 3 s and refresh_before is 2 s: from 1 s on, a request refreshes them
    let refreshed = false
    for (const end = Date.now() + 10_000; !refreshed && Date.now() < end; await sleep(100)) {
      const p = await session.fetch(`${lbUrl}/app`)
      assert.equal(p.status, 200, p.body)
      assert.equal(seen(p.body)['x-auth-request-user'], 'erin')
      refreshed = session.cookie(lbUrl, '_lb_oidc') !== first
    }
    assert.ok(refreshed, 'a new session cookie')
    assert.ok(idp.grants.includes('refresh_token'), `grants: ${idp.grants.join(', ')}`)
    const p = await session.fetch(`${lbUrl}/app`)
    assert.equal(p.status, 200)
    assert.equal(seen(p.body)['x-auth-request-user'], 'erin')
  })

  test('provider down during a login: the callback answers 502, sessions carry on, nothing crashes', async () => {
    const c = new Client()
    const r = await c.fetch(`${lbUrl}/app`)
    const page = await c.go(r.headers.get('location')!)
    const cb = await c.signIn(page, 'fred', `${lbUrl}/oauth2/callback`)
    await idp!.close()
    idp = null
    const answer = await c.fetch(cb.url)
    assert.equal(answer.status, 502)
    assert.match(answer.body, new RegExp(`^identity provider ${issuer} failed during the login: `))
    // the refreshed session: its tokens are due for refresh again, the provider cannot answer, the session stays
    await sleep(1500)
    const p = await session.fetch(`${lbUrl}/app`)
    assert.equal(p.status, 200, p.body)
    assert.equal(seen(p.body)['x-auth-request-user'], 'erin')
    assert.equal(a.lb.proc.exitCode, null)
    await a.lb.logMatching(/token refresh failed/)
    assert.match(a.lb.log(), /token refresh failed/)
  })
})

test('provider stopped after it loaded: browsers and API clients without a session both get 503 naming the provider; sessions carry on', { timeout: 60_000 }, async (t) => {
  const backend = await echo()
  const idpPort = await freePort()
  const issuer = `http://127.0.0.1:${idpPort}`
  const lb = await startLb(mwConfig(backend.address, `[middlewares.sso]\ntype = "oidc"\nissuer = "${issuer}"\n${secrets().toml}\ndiscovery_refresh = "1s"\ntimeout = "1s"\n`, { '/': ['sso'] }))
  let idp: Idp | null = await startIdp({ lb: lb.url, port: idpPort })
  t.after(async () => { await lb.stop(); await idp?.close(); await backend.close() })
  const get = (headers: Record<string, string> = {}): ReturnType<typeof request> => request(`${lb.url}/app`, { headers })
  await everyWorker(`${lb.url}/app`, 302)
  const c = new Client()
  assert.equal((await c.signIn(await c.go(`${lb.url}/app`), 'ivy')).status, 200)
  assert.equal((await get({ accept: 'application/json' })).status, 401, 'provider up: an API client without a session gets 401')
  await idp.close()
  idp = null
  // each worker notices at its next look at the provider (here every second: discovery_refresh); wait until both have
  const browser = await everyWorker(`${lb.url}/app`, 503)
  const reason = new RegExp(`^identity provider ${issuer} is unavailable \\(.*(ECONNREFUSED|fetch failed|timed out|aborted).*\\); try again later`)
  assert.match(browser.body, reason)
  const apiClients: Array<Record<string, string>> = [{ accept: 'application/json' }, { 'x-requested-with': 'XMLHttpRequest' }, { accept: 'application/json, text/plain, */*' }]
  for (const h of apiClients) {
    for (let i = 0; i < 4; i++) {
      const api = await get(h)
      assert.equal(api.status, 503, `${JSON.stringify(h)}: ${api.body}`)
      assert.match(api.body, reason)
      assert.equal(api.headers['retry-after'], '5')
    }
  }
  const session = await c.fetch(`${lb.url}/app`, { headers: { accept: 'application/json' } })
  assert.equal(session.status, 200, 'a session goes on while its provider is away')
  assert.equal(seen(session.body)['x-auth-request-user'], 'ivy')
})
