// Capacities and saved state. lb check, lb run and the config API
// apply one capacity check with one message; the config API refuses a write
// that does not fit before writing anything; a state file that cannot be
// applied never stops a start; temp files of interrupted writes are removed.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { CLI, ROOT, request, simpleConfig, startBackend } from '../helpers.js'
import { restartLb, send, startAdminLb } from './util.js'

const CFG = '/v2/services/lb/configuration'

/** `n` proxy services, each with one server and a router. */
function manyServices (n: number, limits = ''): string {
  let t = `[global]\nworkers = 1\naccess_log = "off"\n${limits}\n[entrypoints.web]\naddress = "127.0.0.1:{{PORT}}"\n`
  for (let i = 0; i < n; i++) {
    t += `[routers.r${i}]\nrule = "Path(\`/${i}\`)"\nservice = "s${i}"\n[services.s${i}]\n[[services.s${i}.servers]]\naddress = "127.0.0.1:9"\ncheck = false\n`
  }
  return t
}

function cli (cmd: 'check' | 'run', text: string): { status: number | null, out: string } {
  const dir = mkdtempSync(join(tmpdir(), 'lb-cap-'))
  try {
    const file = join(dir, 'lb.toml')
    writeFileSync(file, text.replaceAll('{{PORT}}', '1'))
    // `run` of a config that fits would keep running: only configs that must fail are run here
    const r = spawnSync(process.execPath, [CLI, cmd, '-c', file], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 })
    return { status: r.status, out: r.stdout + r.stderr }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

test('lb check and lb run refuse a configuration over an explicit capacity with the same message', () => {
  const text = manyServices(5, '[limits]\nservices = 4\nrouters = 8')
  const check = cli('check', text)
  const run = cli('run', text)
  assert.equal(check.status, 1, check.out)
  assert.equal(run.status, 1, run.out)
  const msg = 'limits.services: at most 4 services (limits.services = 4); raise limits.services, but the configuration has 5'
  assert.ok(check.out.includes(msg), check.out)
  assert.ok(run.out.includes(msg), run.out)
})

test('257 services: lb check passes and lb run starts (capacity "auto" has room for twice the configuration)', async () => {
  const text = manyServices(257)
  assert.equal(cli('check', text).status, 0)
  const a = await startAdminLb(text.replace(/^\[global\][^[]*/, ''), { workers: 1 })
  try {
    assert.equal((await request(`${a.lb.url}/health`)).status, 200)
  } finally {
    await a.lb.stop()
  }
})

test('config API: a write over a capacity answers 400 naming the limit, and nothing is written', async (t) => {
  const b = await startBackend('b1')
  const a = await startAdminLb(simpleConfig([b.address], '', '[limits]\nservices = 3'))
  t.after(async () => { await a.lb.stop(); await b.close() })
  for (const name of ['x1', 'x2']) assert.equal((await send('POST', `${a.admin}${CFG}/backends`, { name })).status, 201)
  const stateFile = join(a.lb.dir, 'run', 'config-api.json')
  const before = readFileSync(stateFile, 'utf8')
  const r = await send('POST', `${a.admin}${CFG}/backends`, { name: 'x3' })
  assert.equal(r.status, 400, r.body)
  assert.match(r.body, /limits\.services: .*3 services .*limits\.services = 3/)
  assert.equal(readFileSync(stateFile, 'utf8'), before, 'the state file changed')
  assert.equal((await request(`${a.lb.url}/`)).status, 200)
  assert.equal(a.lb.proc.exitCode, null)
})

test('a state file that cannot be applied: lb starts from the TOML alone, logs one line, keeps the file aside; temp files go', async (t) => {
  const b = await startBackend('b1')
  let a = await startAdminLb(simpleConfig([b.address], '', '[limits]\nservices = 3'))
  t.after(async () => { await a.lb.stop(); await b.close() })
  assert.equal((await send('POST', `${a.admin}${CFG}/backends`, { name: 'x1' })).status, 201)
  await a.lb.stop('SIGKILL')
  const run = join(a.lb.dir, 'run')
  const stateFile = join(run, 'config-api.json')
  const cases: Array<[string, string, RegExp]> = [
    ['damaged JSON', '{"format": 1, "vers', /config API state file .* is unusable/],
    // written by hand, or by a version without the check: more services than limits.services allows
    ['over a capacity', JSON.stringify({ format: 1, version: 7, backends: { x1: {}, x2: {}, x3: {} } }), /limits\.services: at most 3 services/],
  ]
  for (const [what, text, reason] of cases) {
    writeFileSync(stateFile, text)
    writeFileSync(join(run, 'config-api.json.tmp-4242'), '{"format": 1')
    writeFileSync(join(run, 'config-api.json.tmp-99999'), '')
    a = await restartLb(a)
    const log = a.lb.log()
    const lines = log.split('\n').filter((l) => l.includes('state file set aside'))
    assert.equal(lines.length, 1, `${what}: ${log}`)
    const line = JSON.parse(lines[0]!) as { file: string, reason: string, moved_to: string, action: string }
    assert.equal(line.file, stateFile)
    assert.match(line.reason, reason, what)
    assert.match(line.action, /re-apply them through the config API/)
    assert.equal(readFileSync(line.moved_to, 'utf8'), text, `${what}: the bad file is not kept aside as it was`)
    assert.deepEqual(readdirSync(run).filter((n) => n.includes('.tmp-')), [], `${what}: temp files left`)
    assert.equal((await request(`${a.lb.url}/`)).status, 200, what)
    // the API goes on from the TOML, with a version above the set-aside file's
    const r = await send('POST', `${a.admin}${CFG}/backends`, { name: 'y1' })
    assert.equal(r.status, 201, `${what}: ${r.body}`)
    if (what === 'over a capacity') assert.equal(r.headers['configuration-version'], '9')
    await a.lb.stop('SIGKILL')
  }
  assert.ok(existsSync(stateFile))
})

test('the running capacity: a reload or an API write that does not fit is refused with the limit named, and lb carries on', async (t) => {
  const b = await startBackend('b1')
  const a = await startAdminLb(simpleConfig([b.address]), { workers: 1 })
  t.after(async () => { await a.lb.stop(); await b.close() })
  // sized at start for "auto": 256 services. The file now asks for more (and allows it), which needs a restart.
  const body = manyServices(257, '[limits]\nservices = 300\nrouters = 300').replace(/^\[global\][^[]*/, '')
  const admin = readFileSync(a.lb.file, 'utf8').slice(readFileSync(a.lb.file, 'utf8').indexOf('[admin]'))
  writeFileSync(a.lb.file, `[global]\nworkers = 1\naccess_log = "off"\n${body.replace('{{PORT}}', String(a.lb.port))}\n${admin}`)
  a.lb.reload()
  const log = await a.lb.logMatching(/reload rejected/, 10_000)
  assert.match(log, /reload rejected.*limits\.services: room for 256 services in this process \(limits\.services = \\"auto\\", sized at start\); raise limits\.services and restart, but the configuration has 257/)
  const r = await send('POST', `${a.admin}${CFG}/backends`, { name: 'x1' })
  assert.equal(r.status, 400, r.body)
  assert.match(r.body, /limits\.services: room for 256 services in this process/)
  assert.equal((await request(`${a.lb.url}/`)).status, 200)
})
