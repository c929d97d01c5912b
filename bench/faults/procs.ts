// Processes for the fault campaign (bench/faults/campaign.ts): lb, nginx and
// backends as real processes on loopback, and wrk. Each start resolves once
// the process serves; each process can be signalled like an operator would.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { mkdtempSync as mkdtemp, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { CLI, ROOT, freePort, sleep } from '../../test/helpers.js'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const BACKEND = join(ROOT, 'dist', 'test', 'fixtures', 'faults', 'backend.js')

// every temp folder made here goes when the campaign ends
const made: string[] = []
process.on('exit', () => { for (const d of made) rmSync(d, { recursive: true, force: true }) })
function mkdtempSync (prefix: string): string {
  const d = mkdtemp(prefix)
  made.push(d)
  return d
}

export { freePort, sleep } from '../../test/helpers.js'

export interface Proc { readonly proc: ChildProcess, readonly port: number, readonly dir: string, log: () => string }

/** A backend process answering its name after `delayMs`. */
export function backend (name: string, delayMs = 0): Promise<Proc> {
  return new Promise((res, rej) => {
    const proc = spawn(process.execPath, [BACKEND, name, String(delayMs)], { stdio: ['ignore', 'pipe', 'inherit'] })
    proc.stdout!.once('data', (d: Buffer) => res({ proc, port: Number(d.toString().trim()), dir: '', log: () => '' }))
    proc.once('error', rej)
  })
}

/** lb on `toml` ({{PORT}}: its entry point); resolves once its log matches `ready` (by default the "ready" line). */
export async function lb (toml: string, dir = mkdtempSync(join(tmpdir(), 'lb-faults-')), port?: number, ready = /"msg":"ready"/): Promise<Proc> {
  const p = port ?? await freePort()
  const file = join(dir, 'lb.toml')
  writeFileSync(file, toml.replaceAll('{{PORT}}', String(p)))
  const proc = spawn(process.execPath, [CLI, 'run', '-c', file], { stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  proc.stderr!.on('data', (d: Buffer) => { err += d.toString() })
  for (const end = Date.now() + 20_000; !ready.test(err); await sleep(20)) {
    if (proc.exitCode !== null || Date.now() > end) {
      proc.kill('SIGKILL')
      throw new Error(`lb did not start: ${err}`)
    }
  }
  return { proc, port: p, dir, log: () => err }
}

/** nginx (nginx-light) with `http` as the body of its http {} block ({{PORT}}: its listen port). */
export async function nginx (http: string, extra = ''): Promise<Proc> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'nginx-faults-'))
  writeFileSync(join(dir, 'nginx.conf'), `worker_processes 2;\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log;\n${extra}\nevents { worker_connections 4096; }\n` +
    `http {\n access_log off;\n client_body_temp_path ${dir};\n proxy_temp_path ${dir};\n${http.replaceAll('{{PORT}}', String(port))}\n}\n`)
  const proc = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'ignore' })
  for (const end = Date.now() + 10_000; ; await sleep(20)) {
    const ok = await new Promise<boolean>((r) => { const s = net.connect(port, '127.0.0.1', () => { s.destroy(); r(true) }); s.on('error', () => r(false)) })
    if (ok) break
    if (proc.exitCode !== null || Date.now() > end) throw new Error('nginx did not start')
  }
  return { proc, port, dir, log: () => '' }
}

export const upstreams = (ports: number[]): string => ports.map((p) => `server 127.0.0.1:${p};`).join(' ')

export interface WrkResult { requests: number, non2xx: number, socketErrors: number, rps: number }

/** wrk -t1 for `seconds` against `url`; its request, non-2xx and socket-error counts. */
export function wrk (url: string, seconds: number, conns: number): Promise<WrkResult> {
  return new Promise((res) => {
    const proc = spawn('wrk', ['-t1', `-c${conns}`, `-d${seconds}s`, url], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    proc.stdout!.on('data', (d: Buffer) => { out += d.toString() })
    proc.on('exit', () => {
      const n = (re: RegExp): number => Number(re.exec(out)?.[1] ?? 0)
      const se = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
      res({
        requests: n(/(\d+) requests in/),
        non2xx: n(/Non-2xx or 3xx responses: (\d+)/),
        socketErrors: se === null ? 0 : se.slice(1).reduce((a, x) => a + Number(x), 0),
        rps: n(/Requests\/sec:\s+([\d.]+)/),
      })
    })
  })
}

/** Is a process with this pid gone (exit status after kill)? */
export function waitExit (p: ChildProcess): Promise<{ code: number | null, signal: string | null }> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve({ code: p.exitCode, signal: p.signalCode })
  return new Promise((r) => p.once('exit', (code, signal) => r({ code, signal })))
}

export function nginxAvailable (): boolean {
  return spawnSync('nginx', ['-v']).status === 0
}
