// Per-request cost of jwt: a cached token (repeat requests) and a full jose
// verification (signature, alg allow-list, exp/nbf, iss, aud) per algorithm.
import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SignJWT, exportJWK } from 'jose'
import type { Hooks } from '../../core/plugin.js'
import { browserCtx, middlewares, resetCtx } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

export async function run (): Promise<Result[]> {
  const keys = {
    RS256: generateKeyPairSync('rsa', { modulusLength: 2048 }),
    ES256: generateKeyPairSync('ec', { namedCurve: 'P-256' }),
    EdDSA: generateKeyPairSync('ed25519'),
  }
  const dir = mkdtempSync(join(tmpdir(), 'lb-bench-jwt-'))
  const jwks = { keys: await Promise.all(Object.entries(keys).map(async ([alg, k]) => ({ ...await exportJWK(k.publicKey), kid: alg }))) }
  writeFileSync(join(dir, 'jwks.json'), JSON.stringify(jwks))
  const mw = (name: string, cacheSize: number): string => `
[middlewares.${name}]
type = "jwt"
jwks_file = "${join(dir, 'jwks.json')}"
issuer = "https://issuer.example"
audience = "lb-api"
cache_size = ${cacheSize}
[middlewares.${name}.forward_claims]
sub = "X-User"
`
  const hooks = middlewares(mw('cached', 4096) + mw('uncached', 0))
  const cached = hooks.get('cached')!.onRequest! as NonNullable<Hooks['onRequest']>
  const uncached = hooks.get('uncached')!.onRequest! as NonNullable<Hooks['onRequest']>
  const ctxs: Record<string, ReturnType<typeof browserCtx>> = {}
  for (const [alg, k] of Object.entries(keys)) {
    const token = await new SignJWT({ sub: 'user-42', iss: 'https://issuer.example', aud: 'lb-api', exp: Math.floor(Date.now() / 1000) + 3600 })
      .setProtectedHeader({ alg, kid: alg }).sign(k.privateKey)
    const ctx = browserCtx()
    ctx.headers.push('authorization', `Bearer ${token}`)
    ctxs[alg] = ctx
  }
  await cached(ctxs.RS256!)
  const verify = (alg: string) => ({ defer: true as const, fn: (done: () => void) => { resetCtx(ctxs[alg]!); void (uncached(ctxs[alg]!) as Promise<unknown>).then(done) } })
  return runSuite('jwt', {
    'cached token (RS256)': () => { resetCtx(ctxs.RS256!); cached(ctxs.RS256!) },
    'verify RS256 (2048-bit)': verify('RS256'),
    'verify ES256': verify('ES256'),
    'verify EdDSA (Ed25519)': verify('EdDSA'),
  })
}

if (isMain(import.meta.url)) await run()
