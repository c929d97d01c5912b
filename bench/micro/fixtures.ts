// Realistic per-request inputs for the middleware benchmarks: a Ctx as the
// uWS adapter fills it, and plugin instances created as a worker creates them.
import { parseConfig } from '../../core/configure.js'
import { createLogger } from '../../core/log.js'
import type { Hooks } from '../../core/plugin.js'
import type { Shm } from '../../core/shm/layout.js'
import { createShm } from '../../core/shm/buffer.js'
import { Ctx } from '../../core/worker/request/context.js'
import { PLUGINS } from '../../plugins/index.js'

export const shm: Shm = createShm(2)
const log = createLogger('error')

/** Hooks of each middleware of a `[middlewares]` TOML block (validated as the control plane does). */
export function middlewares (toml: string, baseDir = '/'): Map<string, Hooks> {
  const conf = parseConfig(`[entrypoints.web]\naddress = "127.0.0.1:8080"\n${toml}`, `${baseDir}/bench.toml`)
  return new Map(conf.middlewares.map((m) => [m.name, PLUGINS.get(m.type)!.create(m.conf, { log, shm, name: m.name })]))
}

/** A browser-like GET as the uWS adapter leaves it in a Ctx. */
export function browserCtx (remoteAddress = '203.0.113.7', path = '/index.html'): Ctx {
  const ctx = new Ctx()
  ctx.method = 'GET'
  ctx.path = path
  ctx.host = 'www.example.com'
  ctx.entrypoint = 'web'
  ctx.remoteAddress = remoteAddress
  ctx.headers.push(
    'host', 'www.example.com',
    'user-agent', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
    'accept', 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
    'accept-encoding', 'gzip, deflate, br',
    'accept-language', 'en-US,en;q=0.9',
    'connection', 'keep-alive'
  )
  return ctx
}

/** Clears what the chain writes, so one Ctx can stand for a new request (what a fresh Ctx per request gives). */
export function resetCtx (ctx: Ctx): void {
  ctx.user = ''
  ctx.rateKey = ''
  ctx.reply = null
  ctx.upstreamHeaders = null
  ctx.dropHeaders = null
  ctx.responseHeaders = null
}

/** 100,000 distinct client addresses (more sources than a busy balancer sees in 30 s). */
export const ADDRESSES: readonly string[] = Array.from({ length: 100_000 }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)
