// What lb promises a plugin beyond its hooks: lb/plugin resolves for a plugin
// outside lb's folder (by path next to the config, by package name from
// global.plugins_dir), a plugin written for another plugin API is refused with
// both versions named, and teardown() stops what create() started when a
// reload replaces the instance and when lb shuts down.
import { strict as assert } from 'node:assert'
import { execFile } from 'node:child_process'
import { copyFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join, relative } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { CLI, ROOT, request, startBackend, startLb, tempDir } from '../helpers.js'
import { mwConfig, writeStampPackage } from './setup.js'

const run = promisify(execFile)
const FIXTURES = join(ROOT, 'test', 'fixtures', 'plugins')

test('plugins outside lb\'s folder import lb/plugin: one by path from the config\'s folder, one by package name from global.plugins_dir', async (t) => {
  const dir = tempDir('lb-plugin-host-')
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  copyFileSync(join(ROOT, 'examples', 'plugins', 'request-id.js'), join(dir, 'request-id.js'))
  writeStampPackage(join(dir, 'shared', 'node_modules'))
  const backend = await startBackend('web', (req, res) => res.end(String(req.headers['x-request-id'])))
  t.after(() => backend.close())
  // startLb writes the config into a folder of its own beside `dir`: the plugin path is relative to that
  const rel = (p: string): string => `../${basename(dir)}/${p}`
  const lb = await startLb(`[global]
workers = 1
access_log = "off"
plugins_dir = "${rel('shared')}"

${mwConfig(backend.address, `[middlewares.ids]\ntype = "${rel('request-id.js')}"\n\n[middlewares.stamp]\ntype = "lb-plugin-stamp"\n`, { '/': ['ids', 'stamp'] })}`)
  t.after(() => lb.stop())
  assert.equal(relative(ROOT, lb.dir).startsWith('..'), true, 'the config is outside lb\'s folder')
  const r = await request(`${lb.url}/x`)
  assert.equal(r.status, 200, r.body)
  assert.match(r.body, /^[0-9a-f-]{36}$/, 'request-id sent an id upstream')
  assert.equal(r.headers['x-request-id'], r.body)
  assert.equal(r.headers['x-stamp'], 'clock runs every 10ms')
})

async function check (type: string): Promise<{ code: number, out: string }> {
  const dir = tempDir('lb-plugin-api-')
  try {
    writeFileSync(join(dir, 'lb.toml'), mwConfig('127.0.0.1:1', `[middlewares.m]\ntype = "${type}"\n`, { '/': ['m'] }).replace('{{PORT}}', '8080'))
    const r = await run(process.execPath, [CLI, 'check', '-c', join(dir, 'lb.toml')]).then((x) => ({ code: 0, out: x.stdout }), (e: { code: number, stderr: string }) => ({ code: e.code, out: e.stderr }))
    return r
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

test('plugin API version: a plugin written for another version, or for none, is refused naming both versions', async () => {
  const other = await check(join(FIXTURES, 'other-api.js'))
  assert.equal(other.code, 1)
  assert.match(other.out, /middlewares\.m\.type: .*other-api\.js" \(it was written for plugin API 2, and this lb provides plugin API 1\)/)
  const none = await check(join(FIXTURES, 'no-api.js'))
  assert.equal(none.code, 1)
  assert.match(none.out, /no-api\.js" \(it declares no plugin API version \(add api: 1, the version of this lb, once it works with it\)\)/)
  const ok = await check(join(FIXTURES, 'ticking.js'))
  assert.equal(ok.code, 0, ok.out)
})

test('teardown: a reload stops the replaced instance\'s timer, and shutdown stops the current one', async (t) => {
  const backend = await startBackend('web')
  t.after(() => backend.close())
  const conf = (tag: string): string => mwConfig(backend.address, `[middlewares.tick]\ntype = "${join(FIXTURES, 'ticking.js')}"\ntag = "${tag}"\n`, { '/': ['tick'] })
  const lb = await startLb(conf('one'), { workers: 1 })
  t.after(() => lb.stop())
  const tick = (tag: string): RegExp => new RegExp(`"msg":"tick"[^\\n]*"tag":"${tag}"`, 'g')
  assert.match(await lb.logMatching(tick('one')), tick('one'))
  lb.write(conf('two'))
  lb.reload()
  const stopped = /"msg":"stopped"[^\n]*"tag":"one"/
  assert.match(await lb.logMatching(stopped, 10_000), stopped)
  // the new instance ticks on; the old one never again after its stop
  const after = (): string => lb.log().slice(lb.log().search(stopped))
  for (const end = Date.now() + 10_000; (after().match(tick('two')) ?? []).length < 5 && Date.now() < end;) await new Promise((r) => setTimeout(r, 20))
  assert.ok((after().match(tick('two')) ?? []).length >= 5, 'the new instance ticks')
  assert.equal((after().match(tick('one')) ?? []).length, 0, 'the replaced instance\'s timer stopped')
  assert.equal(await lb.stop(), 0)
  assert.match(lb.log(), /"msg":"stopped"[^\n]*"tag":"two"/)
})
