// Readiness: lb says it is ready (its "ready" log line, and READY=1 on
// systemd's NOTIFY_SOCKET through systemd-notify, conf/lb.service
// Type=notify) only once every listener accepts: the web and tcp entry
// points, the config API, the dashboard and /metrics, the runtime socket and
// the generation socket. The web entry points listen last, so a script that
// waits for the web port and then calls the config API is never refused (its
// requests wait until lb is ready). A reload is RELOADING=1 ... READY=1, a
// stop STOPPING=1.
import assert from 'node:assert/strict'
import net from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { type Lb, freePort, request, sleep, startBackend, startLb, tempDir, waitFor } from '../helpers.js'
import { requireTool } from '../admin/util.js'
import { startNotifySocket } from '../notify-socket.js'

/** Connects to a port or a unix socket path and closes again: "ok", or the error's code. */
function connect (to: number | string): Promise<string> {
  return new Promise((resolve) => {
    const s = typeof to === 'number' ? net.connect(to, '127.0.0.1') : net.connect(to)
    s.once('connect', () => { s.destroy(); resolve('ok') })
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message))
  })
}

/** A reply's status, or the error's code (ECONNREFUSED). */
async function status (url: string): Promise<string> {
  try {
    return String((await request(url)).status)
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? (err as Error).message
  }
}

test('ready (log line and READY=1) only when every listener accepts; a client of the web port finds the config API open; reload and stop are told', { timeout: 120_000 }, async (t) => {
  if (requireTool(t, 'systemd-notify', 'systemd') === null || requireTool(t, 'python3', 'python3') === null) return
  const dir = tempDir()
  const [web, db, admin, dash] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const sock = join(dir, 'lb.sock')
  const gen = join(dir, 'gen.sock')
  const backend = await startBackend('app')
  t.after(() => backend.close())
  const notify = await startNotifySocket(t, join(dir, 'notify'),
    [`tcp:127.0.0.1:${web}`, `tcp:127.0.0.1:${db}`, `tcp:127.0.0.1:${admin}`, `tcp:127.0.0.1:${dash}`, `unix:${sock}`, `unix:${gen}`])

  // what a deployment script does: wait for the web port, then at once use the config API and the rest
  const started: { lb: Lb | null } = { lb: null } // set once startLb returns (it does not wait for ready)
  const script = (async () => {
    for (const end = Date.now() + 60_000; await connect(web) !== 'ok';) {
      // lb gone (a port another test's process took between freePort and lb's listen?): say so with its log, now
      const lb = started.lb
      if (lb !== null && lb.proc.exitCode !== null) throw new Error(`lb exited (${lb.proc.exitCode}) before the web port opened: ${lb.log().slice(-2000)}`)
      if (Date.now() > end) throw new Error(`the web port never opened; lb's log: ${lb?.log().slice(-2000) ?? '(not started)'}`)
      await sleep(1)
    }
    const api = Array.from({ length: 20 }, () => status(`http://127.0.0.1:${admin}/v2/services/lb/configuration/version`))
    const rest = [status(`http://127.0.0.1:${dash}/metrics`), connect(db), connect(sock), connect(gen)]
    return { api: await Promise.all(api), rest: await Promise.all(rest) }
  })()

  const lb = await startLb(`
[global]
workers = 2
access_log = "off"
state_dir = "${dir}"

[entrypoints.web]
address = "127.0.0.1:${web}"

[entrypoints.db]
address = "127.0.0.1:${db}"
protocol = "tcp"
service = "app"

[admin]
enabled = true
address = "127.0.0.1:${admin}"

[dashboard]
address = "127.0.0.1:${dash}"
api = true
metrics = true
insecure = true

[runtime_socket]
enabled = true
path = "${sock}"

[generation]
socket = "${gen}"
ollama_models = "off"

[routers.api]
rule = "PathPrefix(\`/api/\`)"
service = "gen"

[services.gen]
kind = "generate"

[routers.app]
rule = "PathPrefix(\`/\`)"
service = "app"

[[services.app.servers]]
name = "a1"
address = "${backend.address}"
check = false
`, { noWait: true, env: { NOTIFY_SOCKET: notify.path } })
  started.lb = lb
  t.after(() => lb.stop('SIGKILL'))

  // the moment the log says ready, every listener accepts
  let atReady: Promise<string[]> | null = null
  const onLog = (): void => {
    if (atReady === null && /"msg":"ready"/.test(lb.log())) atReady = Promise.all([web, db, admin, dash, sock, gen].map(connect))
  }
  lb.proc.stderr!.on('data', onLog)

  const seen = await script
  assert.deepEqual(seen.api, Array(20).fill('200'), 'the config API, called the moment the web port accepts, answers every call')
  assert.deepEqual(seen.rest, ['200', 'ok', 'ok', 'ok'], 'metrics, the tcp entry point, the runtime socket and the generation socket accept then too')

  await waitFor(() => atReady, 'the "ready" log line', 30_000)
  assert.deepEqual(await atReady, Array(6).fill('ok'), 'every listener accepts when the log says ready')
  const ready = JSON.parse(lb.log().split('\n').find((l) => l.includes('"msg":"ready"'))!) as Record<string, unknown>
  assert.deepEqual(ready.entrypoints, [`web=http://127.0.0.1:${web}`, `db=tcp://127.0.0.1:${db}`])
  assert.equal(ready.admin, `127.0.0.1:${admin}`)
  assert.equal(ready.dashboard, `127.0.0.1:${dash}`)
  assert.equal(ready.runtime_socket, sock)
  assert.equal(ready.generation_socket, gen)
  const lines = lb.log().split('\n')
  const listening = lines.map((l, i) => l.includes('"msg":"listening"') ? i : -1).filter((i) => i >= 0)
  assert.ok(Math.max(...listening) < lines.findIndex((l) => l.includes('"msg":"ready"')), 'every listener logs "listening" before "ready"')

  const first = await notify.next('READY=1')
  assert.deepEqual(first.probes, Object.fromEntries([`tcp:127.0.0.1:${web}`, `tcp:127.0.0.1:${db}`, `tcp:127.0.0.1:${admin}`, `tcp:127.0.0.1:${dash}`, `unix:${sock}`, `unix:${gen}`].map((k) => [k, 'ok'])),
    'when READY=1 reaches the notify socket, every listener already accepts')
  assert.match(first.message.find((m) => m.startsWith('STATUS='))!, /^STATUS=serving web=http:\/\/127\.0\.0\.1:\d+, db=tcp:/)
  assert.equal(notify.messages.filter((m) => !m.message.includes('BARRIER=1')).length, 1, 'READY=1 is the first message')

  // SIGHUP: RELOADING=1 (with systemd 253's MONOTONIC_USEC), then READY=1 once applied
  lb.reload()
  const reloading = await notify.next('RELOADING=1')
  assert.ok(reloading.message.some((m) => /^MONOTONIC_USEC=\d+$/.test(m)), JSON.stringify(reloading))
  const again = await notify.next('READY=1', 2)
  assert.ok(notify.messages.indexOf(reloading) < notify.messages.indexOf(again), 'READY=1 after RELOADING=1')
  assert.ok(again.message.includes('STATUS=configuration generation 2 applied'), JSON.stringify(again))

  // SIGTERM: STOPPING=1, then lb drains and exits 0
  const code = lb.stop('SIGTERM')
  await notify.next('STOPPING=1')
  assert.equal(await code, 0, lb.log())
})
