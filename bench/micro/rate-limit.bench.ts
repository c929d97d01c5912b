// Per-request cost of a rate-limit check: the rateLimit hook (source hash +
// one locked read-modify-write of the shared table) for each algorithm, with
// one hot source and with 100,000 rotating sources (a 3.2 MB table that does
// not fit in cache). Goal: under 200 ns.
import { startClock, now } from '../../core/clock.js'
import { RateTable } from '../../core/shm/rate-table.js'
import { ADDRESSES, browserCtx, middlewares, resetCtx, shm } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

export async function run (): Promise<Result[]> {
  startClock() // as in a worker: the coarse tick, not Date.now() per check
  const hooks = middlewares(`
[middlewares.window]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 1000000000
period = "10s"
[middlewares.zone]
type = "rateLimit"
algorithm = "leakyBucket"
rate = "100r/s"
burst = 20
nodelay = true
[middlewares.tokens]
type = "rateLimit"
average = 50
burst = 100
`)
  const ctx = browserCtx()
  const hook = (name: string): (ctx: ReturnType<typeof browserCtx>) => unknown => hooks.get(name)!.onRequest!
  const window = hook('window')
  const zone = hook('zone')
  const tokens = hook('tokens')
  const table = new RateTable(shm.i32)
  let i = 0
  const rotate = (h: typeof window) => (): void => {
    resetCtx(ctx)
    ctx.remoteAddress = ADDRESSES[i++ % ADDRESSES.length]!
    h(ctx)
  }
  return runSuite('rate limit', {
    'slidingWindow, one hot source': () => { resetCtx(ctx); window(ctx) },
    'slidingWindow, 100k rotating sources': rotate(window),
    'leakyBucket (seed web zone), 100k rotating sources': rotate(zone),
    'tokenBucket (seed Traefik example), 100k rotating sources': rotate(tokens),
    'table.window() alone, hot key (no hashing)': () => { table.window(12345, 67890, now(), 10_000, 1_000_000_000, 30_000) },
  })
}

if (isMain(import.meta.url)) await run()
