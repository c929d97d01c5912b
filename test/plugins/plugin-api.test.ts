// Third-party plugins through the real balancer: loaded by path (relative to
// the config file) and by package name, validated as precisely as built-ins,
// and a plugin that throws fails only its own request, with 500 and a log line.
import { strict as assert } from 'node:assert'
import { execFile } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { join, relative } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { type Backend, CLI, type Lb, request, ROOT, sleep, startBackend, startLb, tempDir } from '../helpers.js'
import { mwConfig } from './setup.js'

const run = promisify(execFile)
const FIXTURES = join(ROOT, 'test', 'fixtures', 'plugins')

/** `lb check` on a config in a temp folder; PLUGINS in `middlewares` becomes the fixtures' path relative to it. */
async function check (middlewares: string): Promise<{ code: number, out: string }> {
  const dir = tempDir('lb-plugins-')
  const text = mwConfig('127.0.0.1:1', middlewares.replaceAll('PLUGINS', relative(dir, FIXTURES)), { '/': ['m'] })
  writeFileSync(join(dir, 'lb.toml'), text.replace('{{PORT}}', '8080'))
  try {
    const r = await run(process.execPath, [CLI, 'check', '-c', join(dir, 'lb.toml')])
    return { code: 0, out: r.stdout }
  } catch (err) {
    const e = err as { code: number, stderr: string }
    return { code: e.code, out: e.stderr }
  }
}

describe('loading third-party plugins', () => {
  test('a path relative to the config file, validated by the plugin\'s own validate()', async () => {
    const ok = await check('[middlewares.m]\ntype = "PLUGINS/throwing.js"\nmode = "request"')
    assert.equal(ok.code, 0, ok.out)
    const bad = await check('[middlewares.m]\ntype = "PLUGINS/throwing.js"\nmode = "sometimes"\ncolour = "red"')
    assert.equal(bad.code, 1)
    assert.match(bad.out, /middlewares\.m\.colour: unknown key \(allowed: mode\)/)
    assert.match(bad.out, /middlewares\.m\.mode: expected one of "request", "create", found "sometimes"/)
  })

  test('modules that cannot be plugins are refused with the reason', async () => {
    const missing = await check('[middlewares.m]\ntype = "PLUGINS/nowhere.js"')
    assert.match(missing.out, /middlewares\.m\.type: expected a middleware type \(rateLimit, .*\) or a plugin module path or package name, found "\.\.\/[^"]*\/nowhere\.js" \(cannot import it: Cannot find module/)
    const half = await check('[middlewares.m]\ntype = "PLUGINS/not-a-plugin.js"')
    assert.match(half.out, /found "\.\.\/[^"]*\/not-a-plugin\.js" \(its default export has no create function\)/)
    const broken = await check('[middlewares.m]\ntype = "PLUGINS/syntax-error.js"')
    assert.match(broken.out, /found "\.\.\/[^"]*\/syntax-error\.js" \(cannot import it: Unexpected end of input\)/)
    const pkg = await check('[middlewares.m]\ntype = "lb-plugin-not-installed"')
    assert.match(pkg.out, /found "lb-plugin-not-installed" \(cannot import it: Cannot find package 'lb-plugin-not-installed'/)
  })
})

describe('a throwing plugin fails its request, never the worker', () => {
  let backend: Backend, lb: Lb
  before(async () => {
    backend = await startBackend('web')
    lb = await startLb(mwConfig(backend.address, `
[middlewares.thrower]
type = "${join(FIXTURES, 'throwing.js')}"

[middlewares.broken-start]
type = "${join(FIXTURES, 'throwing.js')}"
mode = "create"
`, { '/': ['thrower'], '/guarded': ['broken-start'] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('sync throw, async rejection and a throw on the response: 500s and log lines; the same connection keeps working', async () => {
    // one keep-alive connection: every request lands on the same worker, which must survive each failure
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const boom = await request(`${lb.url}/boom`, { agent })
      assert.equal(boom.status, 500)
      assert.equal(boom.body, 'internal error in middleware thrower\n')
      assert.equal((await request(`${lb.url}/fine`, { agent })).status, 200)
      assert.equal((await request(`${lb.url}/boom-async`, { agent })).status, 500)
      assert.equal((await request(`${lb.url}/fine`, { agent })).status, 200)
      // the head is already decided when onResponse runs: the hook is skipped and logged, the response goes through
      assert.equal((await request(`${lb.url}/boom-response`, { agent })).status, 200)
      assert.equal((await request(`${lb.url}/fine`, { agent })).status, 200)
    } finally {
      agent.destroy()
    }
    const log = await lb.logMatching(/middleware failed on response/)
    assert.match(log, /"msg":"middleware failed".*"middleware":"thrower".*boom in onRequest/)
    assert.match(log, /"msg":"middleware failed".*"middleware":"thrower".*boom in an async onRequest/)
    assert.match(log, /"msg":"middleware failed on response".*"middleware":"thrower".*boom in onResponse/)
    assert.doesNotMatch(log, /worker exited/)
  })

  test('a plugin whose create() throws disables itself fail-closed: its routes answer 500, others work', async () => {
    const r = await request(`${lb.url}/guarded/x`)
    assert.equal(r.status, 500)
    assert.equal(r.body, 'internal error in middleware broken-start\n')
    assert.match(lb.log(), /middleware broken-start could not start \(boom in create\); its routes answer 500/)
    assert.equal((await request(`${lb.url}/fine`)).status, 200)
  })
})

describe('the example plugin of PLUGINS.md (examples/plugins/request-id.js)', () => {
  let backend: Backend, lb: Lb
  const example = join(ROOT, 'examples', 'plugins', 'request-id.js')
  const config = (withPackage: boolean): string => mwConfig(backend.address, `
[middlewares.fresh-ids]
type = "${example}"
header = "X-Trace"
trust_client = false
${withPackage ? '[middlewares.ids]\ntype = "lb-plugin-request-id"\n' : ''}`, withPackage ? { '/fresh': ['fresh-ids'], '/': ['ids'] } : { '/fresh': ['fresh-ids'] })
  before(async () => {
    backend = await startBackend('web', (req, res) => {
      req.resume()
      req.on('end', () => {
        if (req.url === '/own-id') res.setHeader('x-request-id', 'from-upstream')
        res.end(JSON.stringify(req.headers))
      })
    })
    lb = await startLb(config(false))
    // then installed as a package next to the config file, the way a user adds one, and picked up by a reload
    const pkg = join(lb.dir, 'node_modules', 'lb-plugin-request-id')
    mkdirSync(pkg, { recursive: true })
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'lb-plugin-request-id', type: 'module', main: 'index.js' }))
    writeFileSync(join(pkg, 'index.js'), `export { default } from ${JSON.stringify(example)}\n`)
    const applied = (): number => (lb.log().match(/"msg":"(configuration applied|reloaded)"/g) ?? []).length
    const n = applied()
    lb.write(config(true))
    lb.reload()
    for (let i = 0; i < 200 && applied() === n; i++) await sleep(25)
    assert.ok(applied() > n, `reload applied: ${lb.log()}`)
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('by path: a fresh id upstream and back, replacing the client\'s when trust_client = false', async () => {
    const fresh = await request(`${lb.url}/fresh`, { headers: { 'x-trace': 'client-123' } })
    assert.match(fresh.headers['x-trace'] as string, /^[0-9a-f-]{36}$/)
    assert.equal(JSON.parse(fresh.body)['x-trace'], fresh.headers['x-trace'])
  })

  test('by package name (loaded on reload): a valid client id is kept; the upstream\'s own id wins', async () => {
    const a = await request(`${lb.url}/a`)
    const id = a.headers['x-request-id'] as string
    assert.match(id, /^[0-9a-f-]{36}$/)
    assert.equal(JSON.parse(a.body)['x-request-id'], id)
    const kept = await request(`${lb.url}/b`, { headers: { 'x-request-id': 'client-123' } })
    assert.equal(kept.headers['x-request-id'], 'client-123')
    assert.equal(JSON.parse(kept.body)['x-request-id'], 'client-123')
    assert.equal((await request(`${lb.url}/own-id`)).headers['x-request-id'], 'from-upstream')
  })
})
