// Shared by the middleware tests: a balancer config with one backend and
// routers carrying middlewares, and config-problem capture.
import { strict as assert } from 'node:assert'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import http2 from 'node:http2'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseConfig } from '../../core/configure.js'
import { type Reply, CLI, ROOT, request } from '../helpers.js'

/**
 * Entry point `web` on {{PORT}}; `routers` maps a path prefix to its
 * middleware names (each router gets its own name r0, r1, ...), all to
 * service `web` at `backend`. `middlewares` is raw TOML.
 */
export function mwConfig (backend: string, middlewares: string, routers: Record<string, string[]>): string {
  const r = Object.entries(routers).map(([prefix, mws], i) => `[routers.r${i}]
rule = "PathPrefix(\`${prefix}\`)"
service = "web"
middlewares = ${JSON.stringify(mws)}
`).join('\n')
  return `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"

${r}
[services.web]
[[services.web.servers]]
address = "${backend}"
check = false

${middlewares}`
}

/** The problems a config is rejected with (fails the test when it is accepted). */
export function problems (text: string, file = '/etc/lb/test.toml'): string {
  try {
    parseConfig(text, file)
  } catch (err) {
    return (err as Error).message
  }
  assert.fail('expected the config to be rejected')
}

/** `lb check` of a config text ({{PORT}} as port 1): its exit status and output. */
export function lbCheck (text: string): { status: number | null, out: string } {
  const dir = mkdtempSync(join(tmpdir(), 'lb-check-'))
  try {
    const file = join(dir, 'lb.toml')
    writeFileSync(file, text.replaceAll('{{PORT}}', '1'))
    const r = spawnSync(process.execPath, [CLI, 'check', '-c', file], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 })
    return { status: r.status, out: r.stdout + r.stderr }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Config text with one middleware named `m` and nothing else that could be wrong. */
export function oneMiddleware (body: string): string {
  return mwConfig('127.0.0.1:1', `[middlewares.m]\n${body}\n`, { '/': ['m'] })
}

/** `n` requests with at most `concurrency` in flight, each on its own connection from `localAddress`. */
export async function burst (url: string, n: number, concurrency: number, opts: http.RequestOptions = {}): Promise<Reply[]> {
  const out: Reply[] = []
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < n) {
      next++
      out.push(await request(url, opts))
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return out
}

export function statuses (rs: Reply[]): Record<number, number> {
  const c: Record<number, number> = {}
  for (const r of rs) c[r.status] = (c[r.status] ?? 0) + 1
  return c
}

/** A plugin package as a user installs one: lb is its optional peer, lb/plugin its only import of lb. */
export function writeStampPackage (nodeModules: string): void {
  const dir = join(nodeModules, 'lb-plugin-stamp')
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'package.json'), JSON.stringify({
    name: 'lb-plugin-stamp', version: '1.0.0', type: 'module', main: 'index.js',
    peerDependencies: { lb: '0.x' }, peerDependenciesMeta: { lb: { optional: true } },
  }))
  writeFileSync(join(dir, 'index.js'), `import { CLOCK_MS, HEADER_NAME, PLUGIN_API, addResponseHeaders, definePlugin, now } from 'lb/plugin'
export default definePlugin({
  name: 'stamp',
  api: PLUGIN_API,
  validate (c, t, path) {
    c.table(t, path, ['header'])
    const header = c.string(t, 'header', path, 'x-stamp')
    if (!HEADER_NAME.test(header)) c.problem(path + '.header', 'a header name', header)
    return { header }
  },
  create (conf) {
    return { onRequest (ctx) { addResponseHeaders(ctx, [conf.header, 'clock ' + (now() > 0 ? 'runs' : 'stopped') + ' every ' + CLOCK_MS + 'ms']); return 0 } }
  },
})
`)
}

export interface H2Reply { status: number, headers: http2.IncomingHttpHeaders, body: string, bytes: Buffer }

/** One request over a new HTTP/2 session to `url` (GET, or POST with `pieces` written one by one, no content-length). */
export function h2request (url: string, path: string, pieces: string[] | null = null): Promise<H2Reply> {
  const s = http2.connect(url)
  return new Promise((resolve, reject) => {
    s.on('error', reject)
    const req = s.request(pieces === null ? { ':path': path } : { ':path': path, ':method': 'POST' })
    let status = 0
    let headers: http2.IncomingHttpHeaders = {}
    const chunks: Buffer[] = []
    req.on('response', (h) => { status = Number(h[':status']); headers = h })
    req.on('data', (d: Buffer) => chunks.push(d))
    req.on('end', () => {
      s.close()
      const bytes = Buffer.concat(chunks)
      resolve({ status, headers, body: bytes.toString('utf8'), bytes })
    })
    req.on('error', reject)
    if (pieces !== null) {
      for (const p of pieces) req.write(p)
      req.end()
    }
  })
}
