// jwt through the real balancer: tokens made with jose, good and bad (expired,
// not yet valid, wrong key, wrong alg, alg none, HMAC keyed with the public
// key, wrong issuer/audience), claims forwarded, keys rotated by SIGHUP.
import { strict as assert } from 'node:assert'
import { type KeyObject, createHmac, generateKeyPairSync } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type JWK, type JWTPayload, SignJWT, exportJWK } from 'jose'
import { type Backend, type Lb, request, sleep, startBackend, startLb, tempDir } from '../helpers.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'

interface Pair { publicKey: KeyObject, privateKey: KeyObject, jwk: JWK }

/** node:crypto key objects: not bound to one algorithm, so a test can misuse an RSA key for PS256 */
async function pair (alg: 'RS256' | 'ES256', kid: string): Promise<Pair> {
  const { publicKey, privateKey } = alg === 'RS256'
    ? generateKeyPairSync('rsa', { modulusLength: 2048 })
    : generateKeyPairSync('ec', { namedCurve: 'P-256' })
  return { publicKey, privateKey, jwk: { ...await exportJWK(publicKey), kid } }
}

const nowSec = (): number => Math.floor(Date.now() / 1000)

function sign (p: Pair, alg: string, claims: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT({ iss: 'https://issuer.test', aud: 'lb-api', sub: 'user-42', exp: nowSec() + 300, ...claims })
    .setProtectedHeader({ alg, kid: p.jwk.kid, ...header })
    .sign(p.privateKey)
}

const b64url = (s: string | Buffer): string => Buffer.from(s).toString('base64url')

describe('jwt config validation', () => {
  let dir: string
  before(async () => {
    dir = tempDir('lb-jwt-')
    const rsa = await pair('RS256', 'k1')
    writeFileSync(join(dir, 'jwks.json'), JSON.stringify({ keys: [rsa.jwk] }))
    writeFileSync(join(dir, 'private.json'), JSON.stringify({ keys: [await exportJWK(rsa.privateKey)] }))
    writeFileSync(join(dir, 'secret.json'), JSON.stringify({ keys: [{ kty: 'oct', k: 'c2VjcmV0' }] }))
    writeFileSync(join(dir, 'broken.json'), '{"keys": [')
  })

  test('never "none", never HMAC, only known algorithms', () => {
    const msg = problems(oneMiddleware(`type = "jwt"\njwks_file = "${join(dir, 'jwks.json')}"\nalgorithms = ["RS256", "none", "HS256", "XY1"]`))
    assert.match(msg, /middlewares\.m\.algorithms\[1\]: "none" is never accepted/)
    assert.match(msg, /middlewares\.m\.algorithms\[2\]: HS256 is refused: HMAC needs a shared secret, and a JWK set holds public keys/)
    assert.match(msg, /middlewares\.m\.algorithms\[3\]: expected one of RS256, .*EdDSA.*, found "XY1"/)
  })

  test('the key file: required, readable JSON, public keys only', () => {
    assert.match(problems(oneMiddleware('type = "jwt"')), /middlewares\.m\.jwks_file: expected a string \(required\), found nothing/)
    assert.match(problems(oneMiddleware(`type = "jwt"\njwks_file = "${join(dir, 'broken.json')}"`)),
      /middlewares\.m\.jwks_file: cannot read a JSON Web Key Set from .*broken\.json: /)
    assert.match(problems(oneMiddleware(`type = "jwt"\njwks_file = "${join(dir, 'private.json')}"`)),
      /middlewares\.m\.jwks_file: .*private\.json: keys\[0\] is a private key; publish only the public part/)
    assert.match(problems(oneMiddleware(`type = "jwt"\njwks_file = "${join(dir, 'secret.json')}"`)),
      /keys\[0\] is a symmetric \("oct"\) key; only public keys are accepted/)
    assert.match(problems(oneMiddleware(`type = "jwt"\njwks_file = "${join(dir, 'jwks.json')}"\n[middlewares.m.forward_claims]\nsub = "Host"`)),
      /middlewares\.m\.forward_claims\.sub: Host is managed by the proxy and cannot carry a claim/)
  })
})

describe('jwt through the balancer', () => {
  let backend: Backend, lb: Lb, rsa: Pair, ec: Pair, other: Pair, jwksFile: string
  before(async () => {
    rsa = await pair('RS256', 'rsa-1')
    ec = await pair('ES256', 'ec-1')
    other = await pair('RS256', 'rsa-1') // same kid, not in the set
    jwksFile = join(tempDir('lb-jwt-'), 'jwks.json')
    writeFileSync(jwksFile, JSON.stringify({ keys: [rsa.jwk, ec.jwk] }))
    backend = await startBackend('web', (req, res) => {
      req.resume()
      req.on('end', () => res.end(JSON.stringify(req.headers)))
    })
    lb = await startLb(mwConfig(backend.address, `
[middlewares.api-jwt]
type = "jwt"
jwks_file = "${jwksFile}"
algorithms = ["RS256", "ES256"]
issuer = "https://issuer.test"
audience = "lb-api"
leeway = "5s"
realm = "api"
[middlewares.api-jwt.forward_claims]
sub = "X-User"
scope = "X-Scope"
`, { '/': ['api-jwt'] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  const call = (token: string | null, headers: Record<string, string> = {}): ReturnType<typeof request> =>
    request(`${lb.url}/api/x`, { headers: token === null ? headers : { ...headers, authorization: `Bearer ${token}` } })

  test('valid RS256 and ES256 tokens pass; chosen claims go upstream, client-sent copies do not', async () => {
    for (const [p, alg] of [[rsa, 'RS256'], [ec, 'ES256']] as const) {
      const r = await call(await sign(p, alg, { scope: 'read write' }), { 'x-user': 'admin' })
      assert.equal(r.status, 200, alg)
      const seen = JSON.parse(r.body)
      assert.equal(seen['x-user'], 'user-42')
      assert.equal(seen['x-scope'], 'read write')
    }
    // a token without the claim: its header is absent upstream, and the client's is still dropped
    const r = await call(await sign(rsa, 'RS256', {}), { 'x-scope': 'admin' })
    assert.equal(JSON.parse(r.body)['x-scope'], undefined)
  })

  test('no token: 401 with the Bearer challenge and no error code (RFC 6750 §3.1)', async () => {
    const r = await call(null)
    assert.equal(r.status, 401)
    assert.equal(r.headers['www-authenticate'], 'Bearer realm="api"')
    assert.equal(r.body, 'Unauthorized\n')
  })

  test('bad tokens: 401 with error="invalid_token"', async () => {
    const header = b64url(JSON.stringify({ alg: 'RS256', kid: 'rsa-1' }))
    const payload = b64url(JSON.stringify({ iss: 'https://issuer.test', aud: 'lb-api', sub: 'x', exp: nowSec() + 300 }))
    const hmacWithPublicKey = (() => {
      const h = b64url(JSON.stringify({ alg: 'HS256', kid: 'rsa-1' }))
      const pem = JSON.stringify(rsa.jwk)
      return `${h}.${payload}.${b64url(createHmac('sha256', pem).update(`${h}.${payload}`).digest())}`
    })()
    const cases: Record<string, string> = {
      expired: await sign(rsa, 'RS256', { exp: nowSec() - 60 }),
      'expired within the leeway is still valid': '',
      'not yet valid': await sign(rsa, 'RS256', { nbf: nowSec() + 60 }),
      'wrong key': await sign(other, 'RS256', {}),
      'wrong alg (PS256 with an allowed key)': await sign(rsa, 'PS256', {}),
      'alg none': `${b64url(JSON.stringify({ alg: 'none' }))}.${payload}.`,
      'HMAC keyed with the public key': hmacWithPublicKey,
      'wrong issuer': await sign(rsa, 'RS256', { iss: 'https://evil.test' }),
      'wrong audience': await sign(rsa, 'RS256', { aud: 'other' }),
      'no exp': await new SignJWT({ iss: 'https://issuer.test', aud: 'lb-api' }).setProtectedHeader({ alg: 'RS256', kid: 'rsa-1' }).sign(rsa.privateKey),
      'tampered payload': (await sign(rsa, 'RS256', {})).replace(/\.[^.]+\./, `.${b64url(JSON.stringify({ sub: 'admin', exp: nowSec() + 300 }))}.`),
      garbage: 'not.a.token',
      'signature stripped': `${header}.${payload}`,
    }
    for (const [name, token] of Object.entries(cases)) {
      if (token === '') continue
      const r = await call(token)
      assert.equal(r.status, 401, name)
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="api", error="invalid_token"', name)
    }
    assert.equal((await call(await sign(rsa, 'RS256', { exp: nowSec() - 2 }))).status, 200, 'expired 2 s ago, leeway 5 s')
  })

  test('a repeated token is served from the cache, and still refused once expired', async () => {
    // valid for 1-2 s more (a whole-second expiry, 5 s leeway): -4 left 0-1 s, which a slow request could miss
    const exp = nowSec() - 3
    const token = await sign(rsa, 'RS256', { exp })
    assert.equal((await call(token)).status, 200)
    await sleep((exp + 5) * 1000 + 100 - Date.now()) // the thing tested: time passes the token's expiry plus its leeway
    assert.equal((await call(token)).status, 401)
  })

  test('the key file is re-read on SIGHUP: rotated keys take effect, old ones stop working', async () => {
    const next = await pair('ES256', 'ec-2')
    const oldToken = await sign(rsa, 'RS256', {})
    assert.equal((await call(oldToken)).status, 200)
    writeFileSync(jwksFile, JSON.stringify({ keys: [next.jwk] }))
    const applied = (): number => (lb.log().match(/"msg":"(configuration applied|reloaded)"/g) ?? []).length
    const n = applied()
    lb.reload()
    for (let i = 0; i < 200 && applied() === n; i++) await sleep(25)
    assert.ok(applied() > n, 'reload applied')
    assert.equal((await call(await sign(next, 'ES256', {}))).status, 200)
    assert.equal((await call(oldToken)).status, 401)
  })
})
