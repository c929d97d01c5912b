// What the README's set-up section says, done as written in this clone: the
// shipped config with the README's backends (examples/backend.js) serves, and
// keeps them UP; the README's `npx lb` commands work; and the surfaces it says
// `npm start` opens are the shipped config's, all on loopback.
import assert from 'node:assert/strict'
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { loadConfig } from '../../core/configure.js'
import { ROOT, request, shippedConfig, startLb, tempDir } from '../helpers.js'

const README = readFileSync(join(ROOT, 'README.md'), 'utf8')
/** The lines of the README's ```bash blocks. */
const COMMANDS = [...README.matchAll(/```bash\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n'))

test('README: the suggested backends come UP under the shipped config and serve /', async (t) => {
  const backendPorts = [...COMMANDS.join('\n').matchAll(/node examples\/backend\.js (\d+)/g)].map((m) => Number(m[1]))
  const shipped = loadConfig(join(ROOT, 'conf', 'lb.toml')).services.find((s) => s.name === 'web')!
  assert.deepEqual(backendPorts, shipped.servers.map((s) => s.port), 'the README starts a backend for each server of the shipped `web` service')
  assert.equal(shipped.healthCheck.path, '/health', 'the seed\'s probe')

  const { text, ports } = await shippedConfig()
  const procs: ChildProcess[] = backendPorts.map((p) => spawn(process.execPath, [join(ROOT, 'examples', 'backend.js'), String(ports.get(p))], { stdio: ['ignore', 'pipe', 'inherit'] }))
  await Promise.all(procs.map((p) => new Promise((resolve) => p.stdout!.once('data', resolve))))
  const state = tempDir()
  const lb = await startLb(text, { env: { STATE_DIRECTORY: state, RUNTIME_DIRECTORY: state }, noWait: false })
  t.after(async () => { await lb.stop(); for (const p of procs) p.kill() })
  // the first check of each server passes (logged once, as every change of a check's outcome)
  for (const name of ['web1', 'web2']) {
    await lb.logMatching(new RegExp(`"msg":"health check passed, server UP"[^\\n]*"server":"${name}"[^\\n]*GET /health → 200`), 10_000)
  }
  const url = `http://127.0.0.1:${await lb.portOf('web')}/`
  const bodies = new Set([(await request(url)).body, (await request(url)).body])
  assert.deepEqual(bodies, new Set(backendPorts.map((p) => `backend :${ports.get(p)}: GET /\n`)))
  assert.doesNotMatch(lb.log(), /server DOWN|health check failed/)
})

test('README: its `npx lb` commands work in a clone', () => {
  const lines = COMMANDS.filter((l) => l.startsWith('npx lb '))
  assert.ok(lines.length > 0)
  for (const line of lines) {
    const cmd = line.replace(/\s+#.*$/, '')
    const out = execFileSync('sh', ['-c', cmd], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, STATE_DIRECTORY: '', RUNTIME_DIRECTORY: '' } })
    assert.match(out, /test is successful/, cmd)
  }
})

test('README: what `npm start` opens is the shipped config\'s, on loopback, and the README says how to turn each off', () => {
  const c = loadConfig(join(ROOT, 'conf', 'lb.toml'))
  const opened = [
    ...c.entrypoints.map((e) => ({ host: e.host, port: e.port, off: `[entrypoints.${e.name}]` })),
    { host: c.admin.host, port: c.admin.port, off: '[admin] enabled = false' },
    { host: c.dashboard.host, port: c.dashboard.port, off: '[dashboard] api' },
  ]
  for (const o of opened) {
    assert.equal(o.host, '127.0.0.1')
    assert.match(README, new RegExp(`\\| 127\\.0\\.0\\.1:${o.port} \\|[^\\n]*${o.off.replace(/[[\]]/g, '\\$&')}`))
  }
  assert.ok(c.admin.users.length === 0 && c.admin.tokens.length === 0 && c.dashboard.insecure, 'shipped without authentication')
  assert.match(README, /without authentication/)
  assert.ok(c.runtimeSocket.enabled)
  assert.match(README, /\| `run\/lb\.sock`, mode 0600 \| `\[runtime_socket\] enabled = false` \|/)
})
