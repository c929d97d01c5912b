// Per-request cost of the seed's whole web chain as conf/lb.toml sets it
// (web-zone rate limit, secure-headers, compress), compiled as a worker
// compiles it: the request hooks, then the response hooks on an upstream
// head. 100,000 rotating sources keep the rate limit on its accept path.
// Goal: under 2 µs per request. The compressing case adds gzip itself (a
// 4 KiB page, compressed once when complete), shown apart.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { startClock } from '../../core/clock.js'
import { createLogger } from '../../core/log.js'
import type { ResponseHead } from '../../core/plugin.js'
import { compileChain, runRequestHooks, runResponseHooks } from '../../core/worker/request/chain.js'
import { ADDRESSES, browserCtx, middlewares, resetCtx } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

const LB_TOML = fileURLToPath(new URL('../../../conf/lb.toml', import.meta.url))
/** 4 KiB of HTML-like text (compresses about 4:1) */
const PAGE = Buffer.from('<li class="item"><a href="/products/12345">Product name, colour and size</a></li>\n'.repeat(52).slice(0, 4096))

/** The [middlewares.*] tables of conf/lb.toml that routers.web lists, as shipped. */
function seedWebMiddlewares (): string {
  const text = readFileSync(LB_TOML, 'utf8')
  const blocks = text.split(/^(?=\[)/m).filter((b) => /^\[middlewares\.(web-zone|secure-headers|compress)\]/.test(b))
  return blocks.join('\n')
}

export async function run (): Promise<Result[]> {
  startClock()
  const hooks = middlewares(seedWebMiddlewares())
  const names = ['web-zone', 'secure-headers', 'compress']
  const chain = compileChain(names.map((name) => ({ name, hooks: hooks.get(name)! })))
  const log = createLogger('error')
  const ctx = browserCtx()
  let i = 0
  const head = (contentLength: number): ResponseHead => ({
    status: 200,
    headers: ['Content-Type', 'text/html; charset=utf-8', 'Cache-Control', 'max-age=60', 'ETag', '"abc"', 'Last-Modified', 'Tue, 01 Oct 2024 10:00:00 GMT'],
    transform: null,
    noBody: false,
    contentLength,
  })
  const request = (): void => {
    resetCtx(ctx)
    ctx.remoteAddress = ADDRESSES[i++ % ADDRESSES.length]!
    if (runRequestHooks(chain, ctx, log) !== 0) throw new Error('refused')
  }
  return runSuite('seed web chain', {
    'request hooks only (rate limit)': request,
    'request + response, 512-byte page (not compressed)': () => {
      request()
      runResponseHooks(chain, ctx, head(512), log)
    },
    'request + response + gzip of a 4 KiB page through the transform': {
      defer: true,
      fn: (done) => {
        request()
        const h = head(PAGE.length)
        runResponseHooks(chain, ctx, h, log)
        const tf = h.transform!
        tf.on('data', () => {})
        tf.once('end', done)
        tf.end(Buffer.from(PAGE))
      },
    },
  })
}

if (isMain(import.meta.url)) await run()
