// oidc on an https entry point (Secure cookies, an https redirect URI), and
// its background work: provider metadata fetched again every
// discovery_refresh, in every worker, and never again once a reload retired
// the instance (teardown stops the timer).
import { strict as assert } from 'node:assert'
import https from 'node:https'
import { SignJWT, importJWK } from 'jose'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, freePort, request, sleep, startLb } from '../helpers.js'
import { type Certs, makeCerts } from '../tls/certs.js'
import { type Idp, echo, secrets, signingKey, startIdp } from './oidc-idp.js'
import { mwConfig } from './setup.js'

function get (url: string): Promise<{ status: number, headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    https.get(url, { rejectUnauthorized: false }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers }))
    }).on('error', reject)
  })
}

describe('oidc on https, and its discovery timer', () => {
  let backend: Backend, lb: Lb, idp: Idp, certs: Certs, config: (withOidc: boolean) => string
  before(async () => {
    certs = makeCerts()
    backend = await echo()
    const idpPort = await freePort()
    const s = secrets()
    const oidc = `[middlewares.sso]\ntype = "oidc"\nissuer = "http://127.0.0.1:${idpPort}"\n${s.toml}\ndiscovery_refresh = "1s"\n`
    // entry point web on https
    config = (withOidc) => mwConfig(backend.address, withOidc ? oidc : '', { '/': withOidc ? ['sso'] : [] })
      .replace('address = "127.0.0.1:{{PORT}}"\n', `address = "127.0.0.1:{{PORT}}"\nprotocol = "https"\n[entrypoints.web.tls]\ncert = "${certs.server.cert}"\nkey = "${certs.server.key}"\n`)
    idp = await startIdp({ lb: 'https://127.0.0.1:1', port: idpPort })
    lb = await startLb(config(true))
  })
  after(async () => { await lb.stop(); await idp.close(); await backend.close() })

  test('on https the login cookie is Secure and the redirect URI is https', async () => {
    let r = await get(`https://127.0.0.1:${lb.port}/app`)
    for (const end = Date.now() + 15_000; r.status !== 302 && Date.now() < end; await sleep(100)) r = await get(`https://127.0.0.1:${lb.port}/app`)
    assert.equal(r.status, 302)
    const cookie = (r.headers['set-cookie'] as string[])[0]!
    assert.match(cookie, /^_lb_oidc_login=v1\.[\w-]+; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax; Secure$/)
    assert.equal(new URL(r.headers.location as string).searchParams.get('redirect_uri'), `https://127.0.0.1:${lb.port}/oauth2/callback`)
  })

  test('metadata is fetched again every discovery_refresh, and no more once a reload retired the instance', async () => {
    const start = idp.discoveries()
    const keys = idp.keySets()
    for (const end = Date.now() + 10_000; (idp.discoveries() < start + 4 || idp.keySets() < keys + 4) && Date.now() < end;) await sleep(100)
    assert.ok(idp.discoveries() >= start + 4, `two workers, every second: ${idp.discoveries() - start} in the wait`)
    assert.ok(idp.keySets() >= keys + 4, `the keys with the metadata: ${idp.keySets() - keys}`)
    lb.write(config(false))
    lb.reload()
    await lb.logMatching(/configuration applied.*"generation":2/, 10_000)
    await sleep(300) // a fetch already in flight when the instance retired may still land
    const retired = [idp.discoveries(), idp.keySets()]
    await sleep(2500)
    assert.deepEqual([idp.discoveries(), idp.keySets()], retired, 'the retired instances fetch nothing')
    assert.equal((await get(`https://127.0.0.1:${lb.port}/app`)).status, 200)
  })
})

describe('oidc when the provider rotates its signing keys', () => {
  test('an ID token of this client is no bearer access token: one with a nonce, or typ "ID", gets 401', { timeout: 60_000 }, async (t) => {
    const backend = await echo()
    const port = await freePort()
    const jwk = signingKey('k1')
    const idp = await startIdp({ lb: 'http://127.0.0.1:1', port, keys: [jwk] })
    const lb = await startLb(mwConfig(backend.address, `[middlewares.sso]\ntype = "oidc"\nissuer = "http://127.0.0.1:${port}"\n${secrets().toml}\n`, { '/': ['sso'] }), { workers: 1 })
    t.after(async () => { await lb.stop(); await idp.close(); await backend.close() })
    // tokens the provider's key signs, for this client (the default bearer_audience): as an access token, and as ID tokens
    const key = await importJWK(jwk as Parameters<typeof importJWK>[0], 'RS256')
    const sign = (claims: Record<string, unknown>): Promise<string> => new SignJWT({ sub: 'ann', ...claims }).setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer(`http://127.0.0.1:${port}`).setAudience('lb').setIssuedAt().setExpirationTime('5m').sign(key)
    const call = async (token: string): Promise<number> => (await request(`${lb.url}/app`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })).status
    const access = await sign({ scope: 'api' })
    let status = 0
    for (const end = Date.now() + 10_000; status !== 200 && Date.now() < end; await sleep(100)) status = await call(access) // until the metadata is loaded
    assert.equal(status, 200, 'the same key and claims without a nonce pass (the test signs correctly)')
    assert.equal(await call(await sign({ nonce: 'n-0S6_WzA2Mj' })), 401, 'an ID token from a login (nonce)')
    assert.equal(await call(await sign({ typ: 'ID' })), 401, 'a Keycloak ID token (typ "ID")')
  })

  test('a bearer token signed by a key lb has not seen makes it fetch the keys again', { timeout: 60_000 }, async (t) => {
    const backend = await echo()
    const port = await freePort()
    let idp = await startIdp({ lb: 'http://127.0.0.1:1', port, keys: [signingKey('k1')] })
    const lb = await startLb(mwConfig(backend.address, `[middlewares.sso]\ntype = "oidc"\nissuer = "http://127.0.0.1:${port}"\n${secrets().toml}\n`, { '/': ['sso'] }), { workers: 1 })
    t.after(async () => { await lb.stop(); await idp.close(); await backend.close() })
    const call = async (token: string): Promise<number> => (await request(`${lb.url}/app`, { headers: { authorization: `Bearer ${token}` } })).status
    const first = await idp.apiToken()
    let status = 0
    for (const end = Date.now() + 10_000; status !== 200 && Date.now() < end; await sleep(100)) status = await call(first)
    assert.equal(status, 200)
    const loaded = idp.keySets()
    // the provider restarts with a new key (same issuer and port): its tokens name kid k2
    await idp.close()
    idp = await startIdp({ lb: 'http://127.0.0.1:1', port, keys: [signingKey('k2')] })
    const second = await idp.apiToken()
    // unknown kid: fetched again at most every 5 s (jose's cooldown), so a flood of made-up kids cannot flood the provider
    status = 0
    for (const end = Date.now() + 15_000; status !== 200 && Date.now() < end; await sleep(200)) status = await call(second)
    assert.equal(status, 200, 'the new key was fetched')
    assert.ok(idp.keySets() >= 1 && loaded >= 1)
    assert.equal(await call(first), 200, 'a cached verdict for the old token')
  })
})
