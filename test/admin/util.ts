// Helpers for the management-surface tests: a balancer with the admin
// listener, dashboard listener and runtime socket on loopback ports lb picks,
// socket and HTTP one-liners, and golden files (UPDATE_GOLDEN=1 rewrites them).
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import type { TestContext } from 'node:test'
import { join } from 'node:path'
import { type Backend, type Lb, type LbOptions, type Reply, ROOT, listeningPort, request, startBackend, startLb } from '../helpers.js'

export interface AdminLb {
  readonly lb: Lb
  readonly admin: string
  readonly dash: string
  readonly sock: string
  readonly adminPort: number
  readonly dashPort: number
}

export interface AdminOptions extends LbOptions {
  /** extra [admin] lines */
  admin?: string
  /** [dashboard] lines (default: everything on, insecure) */
  dashboard?: string
  /** false: no [runtime_socket] */
  socket?: boolean
}

/**
 * `body` is the dynamic part of the config (entry points, routers, services);
 * {{PORT}} is the entry point. The admin and dashboard listeners are on port 0:
 * lb binds free ports and logs them (lb.portOf).
 */
export async function startAdminLb (body: string, o: AdminOptions = {}): Promise<AdminLb> {
  const text = `${body}
[admin]
enabled = true
address = "127.0.0.1:0"
${o.admin ?? ''}

[dashboard]
address = "127.0.0.1:0"
${o.dashboard ?? 'api = true\npage = true\nmetrics = true\ninsecure = true'}

[runtime_socket]
enabled = ${o.socket !== false}
path = "lb.sock"
`
  return adminLb(await startLb(text, o))
}

/** The surfaces of a started lb, once its management listeners are up. */
async function adminLb (lb: Lb): Promise<AdminLb> {
  await waitLog(lb, /"msg":"management started"/)
  // both listening lines come before that one; a listener the config turns off has none (port 0 here)
  const adminPort = listeningPort(lb.log(), 'admin') ?? 0
  const dashPort = listeningPort(lb.log(), 'dashboard') ?? 0
  return { lb, admin: `http://127.0.0.1:${adminPort}`, dash: `http://127.0.0.1:${dashPort}`, sock: join(lb.dir, 'run', 'lb.sock'), adminPort, dashPort }
}

export async function waitLog (lb: Lb, re: RegExp, ms = 15_000): Promise<void> {
  await lb.logMatching(re, ms)
}

/**
 * The same config again (same file, same folder): a restart after stop/kill.
 * The listeners on port 0 (admin, dashboard, the {{PORT}} entry point) get new
 * ports: use the returned AdminLb.
 */
export async function restartLb (a: AdminLb, opts: LbOptions = {}): Promise<AdminLb> {
  return adminLb(await a.lb.restart(opts))
}

/**
 * Sends one line on the runtime socket, keeping its input open, and returns
 * everything until the server closes. `halfClose`: sends `line` as given (add
 * the newline) and ends the input at once, as `echo cmd | socat` does.
 */
export function sock (path: string, line: string, halfClose = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(path)
    let out = ''
    c.setEncoding('utf8')
    c.on('data', (d: string) => { out += d })
    c.on('error', reject)
    c.on('close', () => resolve(out))
    c.on('connect', () => halfClose ? c.end(line) : c.write(line + '\n'))
    c.setTimeout(10_000, () => reject(new Error(`no close within 10 s after ${JSON.stringify(line)}: ${JSON.stringify(out)}`)))
  })
}

/** `echo text | socat stdio unix-connect:path`, as an operator runs a command: socat's output. */
export function socat (path: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = execFile('socat', ['stdio', `unix-connect:${path}`], { encoding: 'utf8', timeout: 10_000 }, (err, out) => err === null ? resolve(out) : reject(err))
    p.stdin!.end(text)
  })
}

export async function json (url: string, opts: Parameters<typeof request>[1] = {}): Promise<Reply & { json: unknown }> {
  const r = await request(url, opts)
  let parsed: unknown = null
  try { parsed = JSON.parse(r.body) } catch { /* not JSON */ }
  return { ...r, json: parsed }
}

export function send (method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply & { json: unknown }> {
  const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body)
  return json(url, { method, body: text, headers: text === undefined ? headers : { 'content-type': 'application/json', ...headers } })
}

const GOLDEN = join(ROOT, 'test', 'golden')

/**
 * Compares `actual` (after `normalize`) with test/golden/NAME; UPDATE_GOLDEN=1 writes it instead.
 * A missing file fails the test: written silently, it would pass whatever the answer was.
 */
export function golden (name: string, actual: unknown): void {
  const file = join(GOLDEN, name)
  const text = typeof actual === 'string' ? actual : JSON.stringify(actual, null, 2) + '\n'
  if (process.env.UPDATE_GOLDEN === '1') {
    mkdirSync(GOLDEN, { recursive: true })
    writeFileSync(file, text)
    return
  }
  if (!existsSync(file)) {
    // the calling test file, for the command to run
    const caller = /(dist\/test\/\S+\.test\.js)/.exec(new Error().stack ?? '')?.[1] ?? 'dist/test/<the test file>.test.js'
    assert.fail(`golden file test/golden/${name} is missing: check the answer below, then write it with ` +
      `UPDATE_GOLDEN=1 npm test -- ${caller}\n${text}`)
  }
  assert.equal(text, readFileSync(file, 'utf8'), `response differs from test/golden/${name} (UPDATE_GOLDEN=1 rewrites it)`)
}

/** Replaces run-specific values (ports, folders) with placeholders. */
export function normalize (text: string, map: Record<string, string | number>): string {
  let t = text
  for (const [k, v] of Object.entries(map)) t = t.split(String(v)).join(k)
  return t
}

/**
 * The path of a tool the test drives, or null: then the test is marked skipped
 * with the reason. The test command installs these first (test/tools.sh), so
 * this happens only where it could not (not root, no apt-get).
 */
export function requireTool (t: TestContext, tool: string, pkg: string): string | null {
  try {
    return execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim()
  } catch {
    t.skip(`${tool} is not installed and the test command could not install it (apt-get install -y ${pkg} as root)`)
    return null
  }
}

export async function backends (n: number): Promise<Backend[]> {
  const out: Backend[] = []
  for (let i = 1; i <= n; i++) out.push(await startBackend(`b${i}`))
  return out
}
