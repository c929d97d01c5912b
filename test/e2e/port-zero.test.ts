// Listeners on port 0: lb binds a port the kernel picks and says which in one
// "listening" log line per listener, as servers do, so no test picks a port,
// closes it and hopes it is still free when lb binds it. An entry point keeps
// its port: every worker serves it, a restarted worker (worker 0, which bound
// it, included) comes back on it, a reload of the same file keeps it; the
// admin and dashboard listeners report theirs.
import { strict as assert } from 'node:assert'
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import { describe, after, before, test } from 'node:test'
import { type Backend, CLI, ROOT, listeners, reloadApplied, request, startBackend, tempDir, waitFor } from '../helpers.js'
import { type AdminLb, json, send, sock, startAdminLb } from '../admin/util.js'

/** web (http, {{PORT}}: port 0) behind the worker-index fixture, db (tcp) on port 0, both to `backend`. */
function config (backend: string): string {
  return `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.db]
address = "127.0.0.1:0"
protocol = "tcp"
service = "web"
[middlewares.which]
type = "${join(ROOT, 'test', 'fixtures', 'plugins', 'worker-index.js')}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
middlewares = ["which"]
[services.web]
[[services.web.servers]]
name = "b1"
address = "${backend}"
check = false
`
}

/** The workers that answered `n` requests to `url`, each on a new connection (the kernel spreads those over the workers listening). */
async function workersServing (url: string, n = 60): Promise<Set<string>> {
  const seen = new Set<string>()
  for (let i = 0; i < n && seen.size < 2; i++) {
    const r = await request(url)
    assert.equal(r.status, 200)
    seen.add(String(r.headers['x-worker']))
  }
  return seen
}

/** The "listening" lines of the log, parsed. */
function listeningLines (log: string): Array<Record<string, string>> {
  return log.split('\n').filter((l) => l.includes('"msg":"listening"')).map((l) => JSON.parse(l) as Record<string, string>)
}

describe('listeners on port 0', () => {
  let backend: Backend, a: AdminLb, web: number, db: number
  before(async () => {
    backend = await startBackend('app')
    a = await startAdminLb(config(backend.address))
    web = a.lb.port
    db = await a.lb.portOf('db')
  })
  after(async () => {
    await a?.lb.stop()
    await backend?.close()
  })

  test('each listener logs the port it bound, once; both workers serve the one web port; the surfaces show the bound address', async () => {
    const lines = listeningLines(a.lb.log())
    assert.deepEqual(lines.map((l) => l.entrypoint ?? l.surface), ['admin', 'dashboard', 'web', 'db'], 'one line per listener, the entry points last (they listen last)')
    assert.deepEqual(lines.map((l) => /^127\.0\.0\.1:(\d+)$/.exec(l.address!)?.[1]), [a.adminPort, a.dashPort, web, db].map(String))
    for (const p of [web, db, a.adminPort, a.dashPort]) assert.ok(p > 0, `port ${p}`)
    assert.equal(new Set([web, db, a.adminPort, a.dashPort]).size, 4)
    assert.match(a.lb.log(), new RegExp(`"msg":"ready".*"entrypoints":\\["web=http://127\\.0\\.0\\.1:${web}","db=tcp://127\\.0\\.0\\.1:${db}"\\]`))

    // uWS listeners in both workers (SO_REUSEPORT); the tcp one in worker 0 only
    assert.equal(listeners(web), 2)
    assert.equal(listeners(db), 1)
    assert.deepEqual(await workersServing(a.lb.url), new Set(['0', '1']), 'requests to the bound port reach both workers')
    assert.equal((await request(`http://127.0.0.1:${db}/through-tcp`)).body, 'app\n', 'the tcp entry point relays')

    // the management listeners answer on their bound ports
    assert.equal((await send('GET', `${a.admin}/v2/services/lb/configuration/version`)).status, 200)
    const ep = (await json(`${a.dash}/api/entrypoints/web`)).json as { address: string }
    assert.equal(ep.address, `127.0.0.1:${web}`, 'the dashboard API shows the bound address')
    assert.equal(((await json(`${a.dash}/api/entrypoints/db`)).json as { address: string }).address, `127.0.0.1:${db}`)
    // show sess finds connections by the entry points' ports: a connection held open on web is one of web's
    const held = await new Promise<net.Socket>((resolve) => {
      const s = net.connect(web, '127.0.0.1', () => resolve(s))
    })
    try {
      await waitFor(async () => / fe=web /.test(await sock(a.sock, 'show sess')), 'show sess to list the connection held open on web')
    } finally {
      held.destroy()
    }
  })

  test('a restarted worker listens on the same port again: worker 0, which bound it, then worker 1', async () => {
    for (const worker of ['0', '1']) {
      const restarts = (): number => (a.lb.log().match(/"msg":"worker restarted"/g) ?? []).length
      const before = restarts()
      // new connections until one lands on that worker, which then ends its thread
      let crashed = false
      for (let i = 0; i < 100 && !crashed; i++) {
        crashed = await request(`${a.lb.url}/crash-worker-${worker}`).then(() => false, () => true)
      }
      assert.ok(crashed, `a request reached worker ${worker}`)
      await waitFor(() => restarts() > before, `worker ${worker} to be restarted`, 10_000)
      await waitFor(() => listeners(web) === 2, 'both workers to listen on the web port again', 10_000)
      assert.deepEqual(await workersServing(a.lb.url), new Set(['0', '1']), `after worker ${worker}'s restart`)
      // worker 0 opens the web port first and the tcp one after an await
      await waitFor(() => listeners(db) === 1, 'the tcp entry point back in worker 0', 10_000)
      assert.equal((await request(`http://127.0.0.1:${db}/`)).status, 200)
    }
    assert.equal(listeningLines(a.lb.log()).length, 4, 'no new port was bound')
  })

  test('a reload of the same file (still :0) keeps the ports and changes no entry point; a real change still needs a restart', async () => {
    const warnings = (): number => (a.lb.log().match(/these sections need a restart/g) ?? []).length
    const w0 = warnings()
    await reloadApplied(a.lb)
    assert.equal(warnings(), w0, 'the same file is no entry point change')
    assert.equal(listeners(web), 2)
    assert.deepEqual(await workersServing(a.lb.url), new Set(['0', '1']))
    assert.equal(((await json(`${a.dash}/api/entrypoints/web`)).json as { address: string }).address, `127.0.0.1:${web}`)

    // the file as startAdminLb wrote it, db moved
    writeFileSync(a.lb.file, readFileSync(a.lb.file, 'utf8').replace('[entrypoints.db]\naddress = "127.0.0.1:0"', '[entrypoints.db]\naddress = "127.0.0.1:1"'))
    await reloadApplied(a.lb)
    assert.match(a.lb.log(), /"msg":"these sections need a restart; their running values stay","sections":\["entrypoints"\]/)
    assert.equal((await request(`http://127.0.0.1:${db}/`)).status, 200, 'the running entry point stays')
    assert.equal(listeningLines(a.lb.log()).length, 4)
  })
})

test('lb check accepts port 0 for entry points, [admin] and [dashboard]; two on port 0 are no clash; a server still needs a port', () => {
  const dir = tempDir()
  const file = join(dir, 'lb.toml')
  const text = `[global]\nstate_dir = "${dir}/run"\n${config('127.0.0.1:9').replace('{{PORT}}', '0')}
[entrypoints.other]
address = "127.0.0.1:0"
[admin]
enabled = true
address = "127.0.0.1:0"
[dashboard]
address = "127.0.0.1:0"
insecure = true
`
  writeFileSync(file, text)
  let r = spawnSync(process.execPath, [CLI, 'check', '-c', file], { encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  writeFileSync(file, text.replace('address = "127.0.0.1:9"', 'address = "127.0.0.1:0"'))
  r = spawnSync(process.execPath, [CLI, 'check', '-c', file], { encoding: 'utf8' })
  assert.equal(r.status, 1)
  assert.match(r.stderr, /services\.web\.servers\[0\]\.address: expected an address like "127\.0\.0\.1:9001" or "unix:\/path", found "127\.0\.0\.1:0"/)
})
