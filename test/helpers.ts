// Test harness: real processes and real sockets on loopback. startLb() runs the
// compiled CLI (`lb run -c FILE`) as a child process, exactly as a user would;
// startBackend() runs a node:http server with a scripted handler.
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const CLI = join(ROOT, 'dist', 'core', 'cli.js')

// folders made by tempDir in this process, removed when it exits (each test file
// runs in its own process): a test that fails half-way leaves nothing behind either
const temps: string[] = []
process.on('exit', () => { for (const d of temps) rmSync(d, { recursive: true, force: true }) })

/**
 * A `/crash` router on entry point "web", tried before every other, whose middleware ends the data-plane worker
 * thread that serves GET /crash (test/fixtures/plugins/exit-worker.js).
 */
export const crashRouter = (service: string): string => `
[middlewares.crash]
type = "${join(ROOT, 'test', 'fixtures', 'plugins', 'exit-worker.js')}"
[routers.crash]
rule = "Path(\`/crash\`)"
priority = 1000
entrypoints = ["web"]
middlewares = ["crash"]
service = "${service}"
`

/** A new folder under os.tmpdir() (TMPDIR), removed with everything in it when this test process exits. */
export function tempDir (prefix = 'lb-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  temps.push(dir)
  return dir
}

// ports handed out by freePort in this process: the kernel may offer a just-closed
// port again, and two ports picked before either is bound must differ
const handedOut = new Set<number>()

/** A port free right now on 127.0.0.1 (closed again before returning), never the same twice in a process. */
export async function freePort (): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((res, rej) => {
      const s = net.createServer()
      s.once('error', rej)
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port
        s.close(() => res(p))
      })
    })
    if (!handedOut.has(port)) {
      handedOut.add(port)
      return port
    }
  }
}

export interface Lb {
  /** the port lb bound for the entry point written on {{PORT}} (from its "listening" log line) */
  readonly port: number
  readonly url: string
  readonly dir: string
  readonly file: string
  readonly proc: ChildProcess
  /** stderr (control-plane log) so far */
  readonly log: () => string
  /**
   * Waits until the log matches `re` (at most `ms`) and returns it. Worker log
   * lines reach stderr through the control plane asynchronously: a line can land
   * after the effect a test observed, so read it with this, not log() at once.
   */
  logMatching (re: RegExp, ms?: number): Promise<string>
  readonly stdout: () => string
  /**
   * The port lb bound for its listener `name`: an entry point, or a management
   * surface ("admin", "dashboard", "generation"), as its "listening" log line
   * says; waits for that line (at most `ms`). For addresses written with port 0.
   */
  portOf (name: string, ms?: number): Promise<number>
  /** rewrites the config file (with the same placeholders) */
  write (toml: string): void
  reload (): void
  stop (signal?: NodeJS.Signals): Promise<number | null>
  /**
   * Runs lb again on the same file and folder (after stop() or a kill) and
   * waits as startLb does. Listeners on port 0 get new ports: use the new Lb.
   */
  restart (opts?: LbOptions): Promise<Lb>
}

export interface LbOptions {
  workers?: number
  env?: Record<string, string>
  /** extra args for node (e.g. --require) */
  nodeArgs?: string[]
  /** do not wait for the entry point to answer */
  noWait?: boolean
}

/**
 * The port of lb's listener `name` (an entry point, or a surface: "admin",
 * "dashboard", "generation") in `log`, lb's stderr: from its last "listening"
 * line (lb logs one per listener once bound); null before there is one.
 */
export function listeningPort (log: string, name: string): number | null {
  let port: number | null = null
  for (const line of log.split('\n').slice(0, -1)) { // whole lines only
    if (!line.includes('"msg":"listening"')) continue
    const o = JSON.parse(line) as { entrypoint?: string, surface?: string, address: string }
    if (o.entrypoint === name || o.surface === name) port = Number(o.address.slice(o.address.lastIndexOf(':') + 1))
  }
  return port
}

/**
 * The entry point whose address `toml` writes as {{PORT}} (lb.port is its
 * port), or null when there is none. {{PORT}} becomes port 0, so it may stand
 * only for an entry point's port.
 */
function portEntryPoint (toml: string): string | null {
  let section = ''
  let name: string | null = null
  for (const line of toml.split('\n')) {
    const header = /^\s*\[+([^\]]+)\]/.exec(line)
    if (header !== null) section = header[1]!.trim()
    if (!line.includes('{{PORT}}')) continue
    const ep = /^entrypoints\.([^.]+)$/.exec(section)
    if (ep === null || !/^\s*address\s*=/.test(line)) throw new Error(`{{PORT}} (lb binds port 0 for it) is only for an entry point's address, found: ${line}`)
    name ??= ep[1]!
  }
  return name
}

/**
 * Writes `toml` (with {{PORT}} replaced by 0 and {{DIR}} by a temp folder) to a
 * temp file and starts the balancer on it: lb binds a free port for the entry
 * point on {{PORT}} and logs it, and lb.port is that port. A `[global]` section
 * with workers = 2 and access_log off is added unless the text has one.
 */
export async function startLb (toml: string, opts: LbOptions = {}): Promise<Lb> {
  const main = portEntryPoint(toml)
  const dir = tempDir()
  const file = join(dir, 'lb.toml')
  const render = (t: string): string => {
    const text = t.replaceAll('{{PORT}}', '0').replaceAll('{{DIR}}', dir)
    return /^\[global\]/m.test(text) ? text : `[global]\nworkers = ${opts.workers ?? 2}\naccess_log = "off"\n\n${text}`
  }
  writeFileSync(file, render(toml))
  return runLb(file, dir, main, render, opts)
}

/** Runs `lb run -c file`; `main`: the entry point lb.port is about. */
async function runLb (file: string, dir: string, main: string | null, render: (t: string) => string, opts: LbOptions): Promise<Lb> {
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), CLI, 'run', '-c', file], {
    cwd: ROOT,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let err = ''
  let out = ''
  proc.stderr!.on('data', (d: Buffer) => { err += d.toString() })
  proc.stdout!.on('data', (d: Buffer) => { out += d.toString() })
  const exited = new Promise<number | null>((res) => proc.on('exit', (code) => res(code)))
  // every "listening" line comes before "ready"; a process keeps its ports, so the first read holds
  let mainPort: number | null = null
  const port = (): number => {
    if (main === null) throw new Error('lb.port: the config has no entry point on {{PORT}} (use lb.portOf(name))')
    mainPort ??= listeningPort(err, main)
    if (mainPort === null) throw new Error(`lb.port: lb has not logged the port of entry point ${main} yet`)
    return mainPort
  }
  const lb: Lb = {
    get port () { return port() },
    get url () { return `http://127.0.0.1:${port()}` },
    dir,
    file,
    proc,
    log: () => err,
    logMatching: (re, ms) => childLogMatching(proc, () => err, re, ms),
    stdout: () => out,
    portOf: (name, ms = 15_000) => waitFor(() => {
      const p = listeningPort(err, name)
      if (p === null && (proc.exitCode !== null || proc.signalCode !== null)) throw new Error(`lb exited before it listened on ${name}: ${err.slice(-2000)}`)
      return p
    }, `lb's "listening" log line of ${name}`, ms),
    write: (t) => writeFileSync(file, render(t)),
    reload: () => { proc.kill('SIGHUP') },
    stop: async (signal = 'SIGTERM') => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
      return exited
    },
    restart: (o = opts) => runLb(file, dir, main, render, o),
  }
  if (opts.noWait !== true) {
    const deadline = Date.now() + 15_000
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`lb exited with ${proc.exitCode}: ${err}`)
      if (/"msg":"ready"/.test(err)) break
      if (Date.now() > deadline) {
        proc.kill('SIGKILL')
        throw new Error(`lb did not start: ${err}`)
      }
      await sleep(20)
    }
  }
  return lb
}

/**
 * A fixed wait. Only for waits that are the thing tested (a time-out window
 * passing, a client's pacing, "nothing happens for N ms"); for an event, use waitFor.
 */
export function sleep (ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}

/** Resident memory of a process in MB, once two readings 300 ms apart agree within 0.5 MB (at most 5 s). */
export async function settledRss (pid: number): Promise<number> {
  const read = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024
  let last = read()
  for (let i = 0; i < 16; i++) {
    await sleep(300) // the sampling interval of the measurement, not a wait for an event
    const now = read()
    if (Math.abs(now - last) < 0.5) return now
    last = now
  }
  return last
}

/**
 * Polls `probe` every `everyMs` until it returns a truthy value, and returns
 * that value; after `ms` fails with "timed out after MS ms waiting for WHAT".
 * A probe that throws ends the wait with its error.
 */
export async function waitFor<T> (probe: () => T | Promise<T>, what: string, ms = 5000, everyMs = 20): Promise<NonNullable<T>> {
  const end = Date.now() + ms
  for (;;) {
    const v = await probe()
    if (v !== null && v !== undefined && v !== false && v !== 0 && v !== '') return v as NonNullable<T>
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}

/** Waits until `log()`, the output of `proc` (`name` in errors), matches `re` and returns it; fails when `proc` exits first or after `ms`. */
export function childLogMatching (proc: ChildProcess, log: () => string, re: RegExp, ms = 4000, name = 'lb'): Promise<string> {
  return waitFor(() => {
    if (re.test(log())) return log()
    if (proc.exitCode !== null || proc.signalCode !== null) {
      throw new Error(`${name} exited (${proc.exitCode ?? proc.signalCode}) before its log matched ${re}: ${log().slice(-2000)}`)
    }
    return null
  }, `the log of ${name} to match ${re}`, ms, 10)
}

/**
 * Listening TCP sockets on `port` (any address, IPv4 and IPv6), read from
 * /proc/net/tcp{,6}: each lb worker has its own (SO_REUSEPORT), so this is the
 * number of workers accepting on an entry point.
 */
export function listeners (port: number): number {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`
  let n = 0
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(f)) continue
    // "sl local_address rem_address st ...": st 0A is LISTEN
    for (const line of readFileSync(f, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      if (cols[1]?.endsWith(hex) === true && cols[3] === '0A') n++
    }
  }
  return n
}

/**
 * The port a child process reports on its stdout (a server started on port 0
 * prints it): the first capture of `re` in its output so far. Fails when the
 * child exits first or after `ms`.
 */
export function childPort (proc: ChildProcess, re = /^(\d+)$/m, ms = 10_000): Promise<number> {
  return new Promise((resolve, reject) => {
    let out = ''
    const done = (err: Error | null, port = 0): void => {
      clearTimeout(timer)
      proc.stdout!.off('data', onData)
      proc.off('exit', onExit)
      if (err === null) resolve(port)
      else reject(err)
    }
    const onData = (d: Buffer): void => {
      out += d.toString()
      const m = re.exec(out)
      if (m !== null) done(null, Number(m[1]))
    }
    const onExit = (code: number | null): void => done(new Error(`${proc.spawnfile} exited (${code}) before printing its port (${re}): ${out}`))
    const timer = setTimeout(() => done(new Error(`${proc.spawnfile} printed no port (${re}) within ${ms} ms: ${out}`)), ms)
    proc.stdout!.on('data', onData)
    proc.once('exit', onExit)
  })
}

/**
 * Waits until the first health check of each of `servers` (server names) has
 * passed: lb logs "health check passed, server UP" when a server's check
 * outcome first becomes a pass (servers start UP, before any check).
 */
export async function firstChecksPassed (lb: Lb, servers: string[], ms = 10_000): Promise<void> {
  for (const name of servers) await lb.logMatching(new RegExp(`"msg":"health check passed, server UP"[^\\n]*"server":"${name}"`), ms)
}

/**
 * Sends SIGHUP and waits until lb has applied the file (one more "configuration
 * applied" line); fails when lb rejects it or after `ms`.
 */
export async function reloadApplied (lb: Lb, ms = 10_000): Promise<void> {
  const applied = /"msg":"configuration applied"/g
  const rejected = /"msg":"reload rejected/g
  const n = (re: RegExp): number => (lb.log().match(re) ?? []).length
  const [a0, r0] = [n(applied), n(rejected)]
  lb.reload()
  await waitFor(() => {
    if (n(rejected) > r0) throw new Error(`lb rejected the reload: ${lb.log().slice(-2000)}`)
    return n(applied) > a0
  }, 'lb to apply the reloaded configuration ("configuration applied")', ms)
}

export interface Backend {
  readonly port: number
  readonly address: string
  /** requests seen, in order */
  readonly requests: Array<{ method: string, url: string, headers: http.IncomingHttpHeaders, body: number }>
  /** TCP connections accepted */
  connections: number
  close (): Promise<void>
}

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse, name: string) => void

/** A real HTTP server on 127.0.0.1; the default handler answers 200 "<name>\n" and /health 200. */
export async function startBackend (name: string, handler?: Handler, port = 0): Promise<Backend> {
  const requests: Backend['requests'] = []
  const server = http.createServer((req, res) => {
    let body = 0
    req.on('data', (d: Buffer) => { body += d.length })
    req.on('end', () => { requests.push({ method: req.method!, url: req.url!, headers: req.headers, body }) })
    if (handler !== undefined) handler(req, res, name)
    else req.on('end', () => res.end(`${name}\n`))
  })
  server.keepAliveTimeout = 120_000
  const b: Backend = {
    port: 0,
    address: '',
    requests,
    connections: 0,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()) }),
  }
  server.on('connection', () => { b.connections++ })
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r))
  const p = (server.address() as net.AddressInfo).port
  Object.assign(b, { port: p, address: `127.0.0.1:${p}` })
  return b
}

export interface Reply { status: number, headers: http.IncomingHttpHeaders, body: string }

/** One HTTP request with node:http (no pooling unless an agent is given). */
export function request (url: string, opts: http.RequestOptions & { body?: string | Buffer } = {}): Promise<Reply> {
  return new Promise((res, rej) => {
    const req = http.request(url, { agent: false, ...opts }, (r) => {
      const chunks: Buffer[] = []
      r.on('data', (d: Buffer) => chunks.push(d))
      r.on('end', () => res({ status: r.statusCode!, headers: r.headers, body: Buffer.concat(chunks).toString() }))
      r.on('error', rej)
    })
    req.on('error', rej)
    req.end(opts.body)
  })
}

/** GET many times from one address (localAddress), returning bodies. */
export async function getMany (url: string, n: number, opts: http.RequestOptions = {}): Promise<string[]> {
  const out: string[] = []
  for (let i = 0; i < n; i++) out.push((await request(url, opts)).body.trim())
  return out
}

export function count (xs: string[]): Record<string, number> {
  const c: Record<string, number> = {}
  for (const x of xs) c[x] = (c[x] ?? 0) + 1
  return c
}

/** A minimal config: entry point `web` on {{PORT}}, router PathPrefix(/) to service `web` with these servers. */
export function simpleConfig (servers: string[], service = '', extra = ''): string {
  return `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"

[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"

[services.web]
${service}
${servers.map((s, i) => `[[services.web.servers]]\nname = "s${i + 1}"\naddress = "${s}"\ncheck = false\n`).join('\n')}
${extra}`
}

/**
 * The shipped conf/lb.toml as other tests run on this machine: lb's own
 * listeners (8080, 5555, 8081) on port 0, so lb binds free ports and logs them
 * (lb.portOf, listeningPort), and the backends' fixed ports (9001, 9002) swapped
 * for free ones (examples/backend.js takes a port, it does not report one);
 * `ports` maps each shipped backend port to the one used.
 */
export async function shippedConfig (): Promise<{ text: string, ports: Map<number, number> }> {
  let text = readFileSync(join(ROOT, 'conf', 'lb.toml'), 'utf8')
  for (const p of [8080, 5555, 8081]) text = text.replaceAll(`"127.0.0.1:${p}"`, '"127.0.0.1:0"')
  const ports = new Map<number, number>()
  for (const p of [9001, 9002]) {
    ports.set(p, await freePort())
    text = text.replaceAll(`"127.0.0.1:${p}"`, `"127.0.0.1:${ports.get(p)}"`)
  }
  return { text, ports }
}
