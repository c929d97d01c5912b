// Per-request cost of basicAuth: a cached success (SHA-256 of the header and a
// map lookup; the path every repeat request takes) and uncached checks of each
// htpasswd format from the fixtures (bcrypt cost 5, htpasswd's default).
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Hooks } from '../../core/plugin.js'
import { browserCtx, middlewares, resetCtx } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

const USERS = join(fileURLToPath(new URL('../../../test/fixtures/auth/users.htpasswd', import.meta.url)))
const basic = (user: string, password: string): string => 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64')

export async function run (): Promise<Result[]> {
  const hooks = middlewares(`
[middlewares.cached]
type = "basicAuth"
users_file = "${USERS}"
[middlewares.uncached]
type = "basicAuth"
users_file = "${USERS}"
cache_size = 0
`)
  const cached = hooks.get('cached')!.onRequest! as NonNullable<Hooks['onRequest']>
  const uncached = hooks.get('uncached')!.onRequest! as NonNullable<Hooks['onRequest']>
  const withAuth = (auth: string): ReturnType<typeof browserCtx> => {
    const ctx = browserCtx()
    ctx.headers.push('authorization', auth)
    return ctx
  }
  const alice = withAuth(basic('alice', 'wonder-land'))
  await cached(alice) // fills the cache (bcrypt, async)
  const bob = withAuth(basic('bob', 'b0b:has:colons'))
  const carol = withAuth(basic('carol', 'sésame ouvre-toi'))
  return runSuite('basic auth', {
    'cached success (bcrypt user)': () => { resetCtx(alice); cached(alice) },
    'uncached {SHA}': () => { resetCtx(carol); uncached(carol) },
    'uncached apr1 MD5 (1000 MD5 rounds)': () => { resetCtx(bob); uncached(bob) },
    'uncached bcrypt $2y$ cost 5': { defer: true, fn: (done) => { resetCtx(alice); void (uncached(alice) as Promise<unknown>).then(done) } },
  })
}

if (isMain(import.meta.url)) await run()
