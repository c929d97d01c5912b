// Side by side in ONE run: lb, nginx and HAProxy terminating TLS in front of
// the same loopback backends (the shared harness's nginx backend config, moved
// to :9141/:9142 so that this can run beside the harness, and a WebSocket echo
// server on :9131), each with 2 workers or
// threads and the same TLS settings (lb's defaults). Four loads, each peer
// once per round, the order of peers reversed every other round:
//   https-keepalive   wrk -c64 over keep-alive HTTPS: requests/s
//   https-new-conn    wrk -c16 with "Connection: close": new TLS connections/s
//                     (wrk resumes about half of them with TLS 1.3 tickets,
//                     which every peer issues: the same mix for all)
//   tls-full          2 x `openssl s_time -new`: full handshakes/s, no resumption
//   ws-messages       32 WebSockets x 16 messages of 64 B in flight: echoes/s
// Results are reported as ratios against nginx measured in the same round
// (median over rounds): the machine is shared, absolute figures are noise.
// Proxy CPU comes from /proc (the harness's lib/proc-cpu.js).
//
//   npm run build && node dist/bench/e2e/tls-ws.js [-d SECS] [-r ROUNDS] [--out DIR] [--only LOAD,...]
//
// LB_OTHER=DIR adds a peer `lb-other` (port 9381): the lb checked out and built
// in DIR, e.g. another uWS build, measured in the same rounds as this one.
// In ws-messages only, `floor` (port 9391, bench/e2e/floor-ws.ts) is the least
// a WebSocket relay on uWS and node:net does, on one thread: never a reference.
//
// Needs nginx, haproxy, wrk and openssl (Debian packages), ../shared/bench
// beside this repository (BENCH_HARNESS to override), and ports 9141, 9142,
// 9149, 9131, 9351, 9361, 9371, 9391 free on 127.0.0.1.
import { type ChildProcess, execFile, execFileSync, spawn, spawnSync } from 'node:child_process'
import { appendFileSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import https from 'node:https'
import net from 'node:net'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { WebSocket } from 'ws'

const run = promisify(execFile)
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const SRC = join(ROOT, 'bench', 'e2e', 'tls-ws')
const HARNESS = process.env.BENCH_HARNESS ?? resolve(ROOT, '..', 'shared', 'bench')
const WS_ECHO_PORT = 9131
/** the harness backend's ports (9101, 9102, stub_status 9109) moved by 40, as the templates expect */
const BACKEND_PORTS = [9141, 9142]

/** wsOnly: the peer serves WebSockets only (the floor): it takes part in ws-messages alone */
interface Peer { readonly name: string, readonly port: number, pid: number, readonly wsOnly?: boolean }
const LB_OTHER = process.env.LB_OTHER ?? ''
const PEERS: Peer[] = [{ name: 'nginx', port: 9351, pid: 0 }, { name: 'haproxy', port: 9361, pid: 0 }, { name: 'lb', port: 9371, pid: 0 },
  ...(LB_OTHER === '' ? [] : [{ name: 'lb-other', port: 9381, pid: 0 }]), { name: 'floor', port: 9391, pid: 0, wsOnly: true }]
const takesPart = (p: Peer, scenario: string): boolean => p.wsOnly !== true || scenario === 'ws-messages'
const REF = 'nginx'

function arg (flag: string, def: string): string {
  const i = process.argv.indexOf(flag)
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : def
}
const DURATION = Number(arg('-d', '10'))
const ROUNDS = Number(arg('-r', '3'))
const OUT = resolve(arg('--out', join(ROOT, 'bench', 'out', `tls-ws-${new Date().toISOString().replace(/[:.]/g, '-')}`)))

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))
const log = (s: string): void => {
  const line = `${new Date().toISOString().slice(11, 19)} ${s}`
  process.stderr.write(line + '\n')
  appendFileSync(join(OUT, 'run.log'), line + '\n')
}

// ---- processes: only the ones started here are ever signalled, by process group
const started: ChildProcess[] = []
function start (name: string, cmd: string, args: string[], cwd: string): ChildProcess {
  mkdirSync(join(OUT, name), { recursive: true })
  const fd = openSync(join(OUT, name, 'stdout.log'), 'a')
  const child = spawn(cmd, args, { cwd, stdio: ['ignore', fd, fd], detached: true })
  started.push(child)
  return child
}
async function stopAll (): Promise<void> {
  for (const c of started.reverse()) {
    if (c.pid === undefined || c.exitCode !== null) continue
    try { process.kill(-c.pid, 'SIGTERM') } catch { continue }
    for (let i = 0; i < 50 && c.exitCode === null && c.signalCode === null; i++) await sleep(100)
    try { process.kill(-c.pid, 'SIGKILL') } catch { /* gone */ }
  }
}

function portFree (port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer()
    s.once('error', () => resolve(false))
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
  })
}

async function waitListening (port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (!(await portFree(port))) return
    await sleep(100)
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`)
}

function get (port: number, path: string): Promise<{ status: number, body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path, rejectUnauthorized: false, agent: false, timeout: 2000 }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode!, body }))
    })
    req.on('timeout', () => req.destroy(new Error('timeout')))
    req.on('error', reject)
  })
}

async function waitReady (port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await get(port, '/')).status === 200) return
    } catch { /* not yet */ }
    await sleep(200)
  }
  throw new Error(`nothing answers 200 on https://127.0.0.1:${port}/`)
}

function wsEcho (port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`wss://127.0.0.1:${port}/ws`, { rejectUnauthorized: false })
    ws.on('open', () => ws.send('preflight'))
    ws.on('message', (d: Buffer) => { resolve(d.toString()); ws.close() })
    ws.on('error', reject)
  })
}

function render (template: string, out: string, vars: Record<string, string>): string {
  let text = readFileSync(join(SRC, template), 'utf8')
  for (const [k, v] of Object.entries(vars)) text = text.replaceAll(`@${k}@`, v)
  writeFileSync(out, text)
  return out
}

// ---- CPU of a process tree, from the harness's /proc reader
function cpuTicks (pid: number): { ticks: number, hz: number } {
  const snap = JSON.parse(execFileSync('node', [join(HARNESS, 'lib', 'proc-cpu.js'), 'snap', `p=${pid}`], { encoding: 'utf8' })) as
    { hz: number, groups: { p: { ticks: number } } }
  return { ticks: snap.groups.p.ticks, hz: snap.hz }
}

// ---- loads: each resolves with operations per second
type Load = (port: number) => Promise<number>
const wrk = (extra: string[], conns: number): Load => async (port) => {
  const r = await run('wrk', ['-t1', `-c${conns}`, `-d${DURATION}s`, ...extra, `https://127.0.0.1:${port}/`], { timeout: (DURATION + 30) * 1000 })
  const m = /Requests\/sec:\s+([\d.]+)/.exec(r.stdout)
  if (m === null) throw new Error(`wrk: ${r.stdout}${r.stderr}`)
  if (/Non-2xx|Socket errors/.test(r.stdout)) log(`  wrk reported errors: ${r.stdout.split('\n').filter((l) => /Non-2xx|Socket errors/.test(l)).join('; ')}`)
  return Number(m[1])
}
const sTime: Load = async (port) => {
  const one = (): Promise<number> => run('openssl', ['s_time', '-connect', `127.0.0.1:${port}`, '-new', '-time', String(DURATION)], { timeout: (DURATION + 30) * 1000 })
    .then((r) => {
      const m = /(\d+) connections in (\d+) real seconds/.exec(r.stdout)
      if (m === null) throw new Error(`s_time: ${r.stdout}`)
      return Number(m[1]) / Number(m[2])
    })
  const rates = await Promise.all([one(), one()])
  return rates[0]! + rates[1]!
}
const wsLoad: Load = async (port) => {
  const r = await run('node', [join(ROOT, 'dist', 'bench', 'e2e', 'ws-load.js'), `wss://127.0.0.1:${port}/ws`, '32', '16', '64', String(DURATION)], { timeout: (DURATION + 30) * 1000 })
  return (JSON.parse(r.stdout) as { msgs_per_s: number }).msgs_per_s
}

const ONLY = arg('--only', '')
const SCENARIOS: Array<{ name: string, unit: string, load: Load }> = [
  { name: 'https-keepalive', unit: 'requests/s', load: wrk([], 64) },
  { name: 'https-new-conn', unit: 'new TLS connections/s', load: wrk(['-H', 'Connection: close'], 16) },
  { name: 'tls-full', unit: 'full handshakes/s', load: sTime },
  { name: 'ws-messages', unit: 'messages/s', load: wsLoad },
].filter((s) => ONLY === '' || ONLY.split(',').includes(s.name))

interface Result { round: number, scenario: string, peer: string, rate: number, cpuS: number }

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  return n === 0 ? NaN : n % 2 === 1 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2
}

function summary (results: Result[]): string {
  const lines = [
    `Each figure: median over ${ROUNDS} rounds of ${DURATION} s; × columns: median of the per-round ratio to ${REF} measured in the same round.`,
    '',
    `| load | peer | × ${REF} throughput | × ${REF} ops per proxy CPU-second | proxy CPU (% of 1 core) |`,
    '|---|---|---|---|---|',
  ]
  for (const sc of SCENARIOS) {
    for (const p of PEERS.filter((x) => takesPart(x, sc.name))) {
      const mine = results.filter((r) => r.scenario === sc.name && r.peer === p.name)
      const ratio = (f: (r: Result) => number): number => median(mine.map((r) => {
        const ref = results.find((x) => x.round === r.round && x.scenario === sc.name && x.peer === REF)!
        return f(r) / f(ref)
      }))
      const perCpu = (r: Result): number => (r.rate * DURATION) / Math.max(r.cpuS, 0.01)
      const cpuPct = median(mine.map((r) => (100 * r.cpuS) / DURATION))
      lines.push(`| ${sc.name} (${sc.unit}) | ${p.name} | ${ratio((r) => r.rate).toFixed(2)} | ${ratio(perCpu).toFixed(2)} | ${cpuPct.toFixed(0)} |`)
    }
  }
  return lines.join('\n') + '\n'
}

async function main (): Promise<void> {
  mkdirSync(OUT, { recursive: true })
  if (!existsSync(join(HARNESS, 'peers', 'backend-nginx.conf'))) throw new Error(`no harness at ${HARNESS} (set BENCH_HARNESS)`)
  for (const port of [...BACKEND_PORTS, 9149, WS_ECHO_PORT, ...PEERS.map((p) => p.port)]) {
    if (!(await portFree(port))) throw new Error(`127.0.0.1:${port} is in use`)
  }
  const meta = {
    date: new Date().toISOString(),
    duration_s: DURATION,
    rounds: ROUNDS,
    nproc: Number(execFileSync('nproc', { encoding: 'utf8' })),
    node: process.version,
    nginx: spawnSync('nginx', ['-v'], { encoding: 'utf8' }).stderr.trim(),
    haproxy: execFileSync('haproxy', ['-v'], { encoding: 'utf8' }).split('\n')[0],
    openssl: execFileSync('openssl', ['version'], { encoding: 'utf8' }).trim(),
  }
  writeFileSync(join(OUT, 'meta.json'), JSON.stringify(meta, null, 2))

  // certificates: the example script, one EC P-256 certificate for every peer
  const certs = join(OUT, 'certs')
  execFileSync('bash', [join(ROOT, 'conf', 'make-cert.sh'), certs], { stdio: 'ignore' })
  writeFileSync(join(certs, 'haproxy.pem'), readFileSync(join(certs, 'lb.crt'), 'utf8') + readFileSync(join(certs, 'lb.key'), 'utf8'))

  // backends
  mkdirSync(join(OUT, 'backend', 'tmp'), { recursive: true })
  const backendConf = join(OUT, 'backend', 'backend-nginx.conf')
  writeFileSync(backendConf, readFileSync(join(HARNESS, 'peers', 'backend-nginx.conf'), 'utf8')
    .replaceAll('127.0.0.1:9101', '127.0.0.1:9141').replaceAll('127.0.0.1:9102', '127.0.0.1:9142').replaceAll('127.0.0.1:9109', '127.0.0.1:9149'))
  start('backend', 'nginx', ['-p', join(OUT, 'backend') + '/', '-e', 'error.log', '-c', backendConf, '-g', 'daemon off;'], OUT)
  start('ws-echo', 'node', [join(ROOT, 'dist', 'bench', 'e2e', 'ws-echo-server.js'), String(WS_ECHO_PORT)], OUT)
  for (const port of [...BACKEND_PORTS, WS_ECHO_PORT]) await waitListening(port)

  // peers
  const vars = (p: Peer): Record<string, string> => ({ HARNESS, CERTS: certs, PORT: String(p.port), STATE: join(OUT, p.name, 'state') })
  for (const p of PEERS) {
    const dir = join(OUT, p.name)
    mkdirSync(join(dir, 'tmp'), { recursive: true })
    let child: ChildProcess
    if (p.name === 'nginx') child = start(p.name, 'nginx', ['-p', dir + '/', '-e', 'error.log', '-c', render('nginx.conf.in', join(dir, 'nginx.conf'), vars(p)), '-g', 'daemon off;'], dir)
    else if (p.name === 'haproxy') child = start(p.name, 'haproxy', ['-db', '-f', render('haproxy.cfg.in', join(dir, 'haproxy.cfg'), vars(p))], dir)
    else if (p.wsOnly === true) child = start(p.name, 'node', [join(ROOT, 'dist', 'bench', 'e2e', 'floor-ws.js'), String(p.port), String(WS_ECHO_PORT), join(certs, 'lb.crt'), join(certs, 'lb.key')], dir)
    else child = start(p.name, 'node', [join(p.name === 'lb' ? ROOT : resolve(LB_OTHER), 'dist', 'core', 'cli.js'), 'run', '-c', render('lb.toml.in', join(dir, 'lb.toml'), vars(p))], dir)
    p.pid = child.pid!
    if (p.wsOnly === true) await waitListening(p.port)
    else await waitReady(p.port)
    const body = p.wsOnly === true ? null : (await get(p.port, '/')).body // the floor serves WebSockets only
    const echo = await wsEcho(p.port)
    if ((body !== null && body !== '{"status":"ok"}\n') || echo !== 'preflight') throw new Error(`preflight ${p.name}: body ${JSON.stringify(body)}, ws ${echo}`)
    log(`started ${p.name} (pid ${p.pid}) on https://127.0.0.1:${p.port}: preflight ok`)
  }

  // warm-up (JIT, TLS session caches), not recorded
  for (const p of PEERS) {
    if (p.wsOnly !== true) await run('wrk', ['-t1', '-c64', '-d3s', `https://127.0.0.1:${p.port}/`])
    await run('node', [join(ROOT, 'dist', 'bench', 'e2e', 'ws-load.js'), `wss://127.0.0.1:${p.port}/ws`, '32', '16', '64', '2'])
  }

  const results: Result[] = []
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 === 1 ? PEERS : [...PEERS].reverse()
    for (const sc of SCENARIOS) {
      for (const p of order.filter((x) => takesPart(x, sc.name))) {
        const c0 = cpuTicks(p.pid)
        const rate = await sc.load(p.port)
        const c1 = cpuTicks(p.pid)
        const r: Result = { round, scenario: sc.name, peer: p.name, rate, cpuS: (c1.ticks - c0.ticks) / c0.hz }
        results.push(r)
        appendFileSync(join(OUT, 'results.jsonl'), JSON.stringify(r) + '\n')
        log(`r${round} ${sc.name.padEnd(16)} ${p.name.padEnd(8)} ${Math.round(rate).toString().padStart(7)} ${sc.unit}  proxy cpu ${r.cpuS.toFixed(1)} s`)
        await sleep(1000)
      }
    }
  }
  const text = summary(results)
  writeFileSync(join(OUT, 'summary.md'), text)
  process.stdout.write('\n' + text + `\nresults: ${OUT}\n`)
}

main().then(stopAll, async (err: Error) => {
  process.stderr.write(`tls-ws: ${err.message}\n`)
  await stopAll()
  process.exitCode = 1
})
process.on('SIGINT', () => { void stopAll().then(() => process.exit(130)) })
