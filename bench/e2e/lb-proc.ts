// One lb process for the e2e benchmarks that drive it from node: a config with
// one entry point in front of `backend`, the management surfaces off, started
// from dist/ in a temporary state directory; its CPU and memory from /proc.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

export interface LbProc {
  readonly port: number
  readonly pid: number
  /** user + system CPU seconds of the process, all threads */
  cpu (): number
  /** resident memory in bytes */
  rss (): number
  stop (): Promise<void>
}

/** Starts lb with `workers` workers before `backend` (host:port); `extra` is TOML added at the top. */
export async function startLbProc (backend: string, workers: number, extra = ''): Promise<LbProc> {
  const dir = mkdtempSync(join(tmpdir(), 'lb-bench-'))
  const port = 20000 + Math.floor(Math.random() * 20000)
  writeFileSync(join(dir, 'lb.toml'), `${extra}
[global]
workers = ${workers}
state_dir = "${dir}"
[entrypoints.web]
address = "127.0.0.1:${port}"
[routers.r]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "${backend}"
check = false
[admin]
enabled = false
[dashboard]
api = false
page = false
metrics = false
[runtime_socket]
enabled = false
[generation]
enabled = false
`)
  const lb: ChildProcess = spawn(process.execPath, [join(ROOT, 'dist', 'core', 'cli.js'), 'run', '-c', join(dir, 'lb.toml')], { stdio: ['ignore', 'ignore', 'pipe'] })
  await new Promise<void>((resolve, reject) => {
    lb.stderr!.on('data', (d: Buffer) => { if (d.toString().includes('"msg":"ready"')) resolve() })
    lb.on('exit', (code) => reject(new Error(`lb exited with ${code}`)))
  })
  const stat = (): string[] => readFileSync(`/proc/${lb.pid!}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return {
    port,
    pid: lb.pid!,
    cpu: () => { const f = stat(); return (Number(f[11]) + Number(f[12])) / 100 },
    rss: () => Number(stat()[21]) * 4096,
    stop: async () => {
      lb.kill('SIGTERM')
      await new Promise((r) => lb.on('exit', r))
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
