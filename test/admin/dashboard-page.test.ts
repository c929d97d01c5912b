// The /dashboard/ page in headless Chromium (Debian package "chromium"),
// driven over the DevTools protocol while traffic flows: it must list the
// routers, show each server UP or DOWN, and chart a non-zero request rate,
// error rate and latency. LB_DASHBOARD_SCREENSHOT=file.png saves what it shows.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { test } from 'node:test'
import WebSocket from 'ws'
import { request, sleep, tempDir } from '../helpers.js'
import { backends, requireTool, startAdminLb } from './util.js'

interface Cdp {
  call (method: string, params?: Record<string, unknown>): Promise<Record<string, unknown>>
  close (): void
}

async function startChromium (bin: string): Promise<{ proc: ChildProcess, port: number, dir: string }> {
  const dir = tempDir('lb-chromium-')
  const proc = spawn(bin, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-dev-shm-usage', `--user-data-dir=${dir}`, '--remote-debugging-port=0',
    // its own temporary files (org.chromium.Chromium.*) go into the folder removed after the test
    '--window-size=1280,1000', 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, TMPDIR: dir } })
  let err = ''
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`chromium did not start: ${err}`)), 20_000)
    proc.stderr!.on('data', (d: Buffer) => {
      err += d.toString()
      const m = /DevTools listening on ws:\/\/127\.0\.0\.1:(\d+)\//.exec(err)
      if (m !== null) { clearTimeout(timer); resolve(Number(m[1])) }
    })
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`chromium exited ${code}: ${err}`)) })
  })
  return { proc, port, dir }
}

async function connect (port: number, url: string): Promise<Cdp> {
  const r = await request(`http://127.0.0.1:${port}/json/new?${url}`, { method: 'PUT' })
  const target = JSON.parse(r.body) as { webSocketDebuggerUrl: string }
  const ws = new WebSocket(target.webSocketDebuggerUrl)
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
  let id = 0
  const waiting = new Map<number, (v: Record<string, unknown>) => void>()
  ws.on('message', (data) => {
    const msg = JSON.parse(String(data)) as { id?: number, result?: Record<string, unknown>, error?: unknown }
    if (msg.id !== undefined) waiting.get(msg.id)?.(msg.result ?? { error: msg.error })
  })
  return {
    call: (method, params = {}) => new Promise((resolve) => {
      const n = ++id
      waiting.set(n, resolve)
      ws.send(JSON.stringify({ id: n, method, params }))
    }),
    close: () => ws.close(),
  }
}

test('dashboard page: routers, server health and live charts in headless Chromium', { timeout: 60_000 }, async (t) => {
  const bin = requireTool(t, 'chromium', 'chromium')
  if (bin === null) return
  const [b1] = await backends(1)
  const config = `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[routers.broken]
rule = "PathPrefix(\`/broken\`)"
service = "broken"
[services.web]
[[services.web.servers]]
name = "w1"
address = "${b1!.address}"
[[services.web.servers]]
name = "gone"
address = "127.0.0.1:1"
[services.web.health_check]
interval = "100ms"
fall = 1
[services.broken]
[[services.broken.servers]]
name = "x"
address = "127.0.0.1:1"
check = false
`
  const a = await startAdminLb(config)
  const chrome = await startChromium(bin)
  t.after(async () => {
    chrome.proc.kill('SIGKILL')
    await a.lb.stop()
    await b1!.close()
    rmSync(chrome.dir, { recursive: true, force: true })
  })
  let traffic = true
  const load = (async () => {
    for (let i = 0; traffic; i++) {
      await request(i % 5 === 0 ? `${a.lb.url}/broken` : `${a.lb.url}/`).catch(() => undefined)
      await sleep(10)
    }
  })()
  t.after(async () => { traffic = false; await load })

  const cdp = await connect(chrome.port, `${a.dash}/dashboard/`)
  t.after(() => cdp.close())
  const read = async (): Promise<{ routers: string[], servers: Array<[string, string]>, rate: string, errors: string, latency: string, points: string, error: string }> => {
    const r = await cdp.call('Runtime.evaluate', {
      returnByValue: true,
      expression: `JSON.stringify({
        routers: [...document.querySelectorAll('#routers tbody tr')].map((tr) => tr.dataset.name),
        servers: [...document.querySelectorAll('#services .server')].map((s) => [s.dataset.url, s.dataset.status]),
        rate: document.getElementById('rate').textContent,
        errors: document.getElementById('errors').textContent,
        latency: document.getElementById('latency').textContent,
        points: document.getElementById('rate-chart').dataset.points || '',
        error: document.getElementById('error').textContent,
      })`,
    })
    const value = (r.result as { value?: string } | undefined)?.value
    // undefined while the page is still loading (its elements do not exist yet)
    return value === undefined ? { routers: [], servers: [], rate: '', errors: '', latency: '', points: '', error: '' } : JSON.parse(value)
  }
  let seen = await read()
  const deadline = Date.now() + 25_000
  while (Date.now() < deadline && (Number(seen.points || 0) < 3 || seen.servers.every(([, s]) => s === 'UP'))) {
    await sleep(500)
    seen = await read()
  }
  assert.equal(seen.error, '', 'the page reports no fetch error')
  assert.deepEqual(seen.routers, ['broken@file', 'web@file'])
  assert.deepEqual(seen.servers.sort(), [
    ['http://127.0.0.1:1', 'DOWN'], ['http://127.0.0.1:1', 'DOWN'], [`http://${b1!.address}`, 'UP'],
  ].sort(), 'server health per service (the unchecked "broken" server is taken out by passive failure marking)')
  assert.ok(Number(seen.points) >= 3, `chart points: ${seen.points}`)
  assert.ok(Number(seen.rate) > 5, `request rate ${seen.rate}`)
  assert.ok(Number(seen.errors) > 5, `5xx error rate ${seen.errors}`)
  assert.match(seen.latency, /^\d+(\.\d+)? \/ \d+(\.\d+)?$/)

  const shot = process.env.LB_DASHBOARD_SCREENSHOT
  if (shot !== undefined && shot !== '') {
    const png = await cdp.call('Page.captureScreenshot', { format: 'png' })
    writeFileSync(shot, Buffer.from(png.data as string, 'base64'))
  }
})
