// Headless Chromium (Debian package "chromium") for the tests that need a real
// browser (the dashboard page, the oidc login), driven over the DevTools protocol.
import { type ChildProcess, spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import WebSocket from 'ws'
import { request, tempDir } from './helpers.js'

export interface Cdp {
  call (method: string, params?: Record<string, unknown>): Promise<Record<string, unknown>>
  close (): void
}

/** `extra`: more switches (e.g. --ignore-certificate-errors for a test CA). */
export async function startChromium (bin: string, extra: readonly string[] = []): Promise<{ proc: ChildProcess, port: number, dir: string }> {
  const dir = tempDir('lb-chromium-')
  const proc = spawn(bin, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-dev-shm-usage', `--user-data-dir=${dir}`, '--remote-debugging-port=0',
    '--window-size=1280,1000', ...extra, 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, TMPDIR: dir }, detached: true }) // its own temporary files go into the folder removed after the test
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

export async function connect (port: number, url: string): Promise<Cdp> {
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

/** Kills chromium's whole process group (its helper processes write into the profile until they are gone), then removes the profile. */
export async function stopChromium (chrome: { proc: ChildProcess, dir: string }): Promise<void> {
  const exited = new Promise((r) => chrome.proc.once('exit', r))
  try { process.kill(-chrome.proc.pid!, 'SIGKILL') } catch { /* already gone */ }
  if (chrome.proc.exitCode === null && chrome.proc.signalCode === null) await exited
  rmSync(chrome.dir, { recursive: true, force: true, maxRetries: 5 })
}
