// Per-request cost of oidc with a valid session cookie (goal: under 5 µs):
// the cached path every request after the first takes (cookie lookup, the
// revocation check, claims forwarded as headers, lb's cookie taken out of the
// Cookie header forwarded), the same after a revocation elsewhere (one look in
// the revocation table), and the first sight of a cookie (AES-256-GCM open and
// JSON parse) that the cache saves.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Hooks } from '../../core/plugin.js'
import { REVOKE_BASE, RVH_GEN } from '../../core/shm/layout.js'
import { CookieSealer } from '../../plugins/oidc-cookie.js'
import { browserCtx, middlewares, resetCtx, shm } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

export async function run (): Promise<Result[]> {
  const key = randomBytes(32)
  const dir = mkdtempSync(join(tmpdir(), 'lb-bench-oidc-'))
  writeFileSync(join(dir, 'cookie'), key.toString('base64'))
  // the provider is never reached: discovery fails in the background, which the session path does not need
  const hooks = middlewares(`
[middlewares.sso]
type = "oidc"
issuer = "https://idp.invalid"
client_id = "lb"
client_secret = "bench"
cookie_secret_file = "${join(dir, 'cookie')}"
`)
  rmSync(dir, { recursive: true })
  const sso = hooks.get('sso')!
  const onRequest = sso.onRequest! as NonNullable<Hooks['onRequest']>
  const sealer = new CookieSealer(key, '_lb_oidc', { issuer: 'https://idp.invalid', clientId: 'lb', emailDomains: [], claimMatch: [], forward: [['sub', 'x-auth-request-user'], ['email', 'x-auth-request-email']] })
  const session = {
    i: randomBytes(16).toString('base64url'),
    b: Date.now(),
    u: 'ann@example.com',
    h: ['x-auth-request-user', '3f9c2a4e-1b7d-4c55-9e0a-5d2f8b6c7a10', 'x-auth-request-email', 'ann@example.com'],
    e: Date.now() + 3_600_000,
    t: Date.now() + 3_600_000,
    r: 'x'.repeat(43), // a refresh token as oidc-provider issues them
  }
  const cookie = sealer.sealSession(session)
  const ctx = browserCtx()
  ctx.headers.push('cookie', `_ga=GA1.1.123456789.1700000000; theme=dark; _lb_oidc=${cookie}; lang=en`)
  if (onRequest(ctx) !== 0) throw new Error('the session cookie was not accepted')
  const results = await runSuite('oidc', {
    'valid session cookie (cached)': () => { resetCtx(ctx); onRequest(ctx) },
    // another session was revoked since this one's last look: it is looked up in the revocation table again
    'valid session cookie, a revocation since': () => { Atomics.add(shm.i32, REVOKE_BASE + RVH_GEN, 2); resetCtx(ctx); onRequest(ctx) },
    'open a session cookie (first sight)': () => { sealer.openSession(cookie) },
  })
  sso.teardown?.()
  return results
}

if (isMain(import.meta.url)) await run()
