// HTTP/2 and gRPC per proxy CPU-second, lb against nginx and HAProxy in ONE
// run (issue #37), in front of the same backends: an nginx answering 16 B on
// / and 4 KiB on /big, and a grpc-js server with one unary method. Loads, by
// h2load, each target once per round, the order reversed every other round:
//   h2-16B, h2-4KiB   HTTPS h2 (ALPN), 64 connections x 10 streams: nginx
//                     (`listen ssl http2`), HAProxy (`alpn h2,http/1.1`), lb (http2 = true)
//   h1-tls-16B        HTTP/1.1 over TLS (h2load --h1, 64 connections) to lb's
//                     entry point with http2 = true and to one with it off (uWS TLS, as before h2)
//   grpc-unary        gRPC unary calls over h2c, 64 x 10: nginx grpc_pass,
//                     HAProxy proto h2, lb with an h2c service
// Beside them, in the h2 and gRPC loads and never a reference, "floor": node:http2
// on one thread doing the least (bench/h2/floor-h2.ts; answering h2 itself,
// forwarding gRPC on one session), the bound of any proxy built on node:http2,
// and in the h2 loads "floor-fwd": the same forwarding to the backend over
// HTTP/1.1 node:net connections, the floor of lb's h2 design.
// Printed per load: requests/s, requests per proxy CPU-second, that ÷ the best
// of nginx and HAProxy (h1: lb with http2 ÷ lb without), p99 from h2load's
// per-request log, the proxy's CPU, and a noise line: the machine's busy
// cores, and what of it was neither proxy, backend nor h2load (other work).
// Goals (issue #37): h2 and gRPC at least 0.8x the best peer per CPU; h1 over
// TLS with http2 on at least 0.95x of lb without it.
//
//   npm run build && bash bench/h2/run.sh [-d SECS | -n REQUESTS] [-r ROUNDS] [--only LOAD,...] [--out DIR]
//
// Needs nginx, haproxy, h2load (nghttp2-client) and openssl; free ports are picked.
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process'
import { appendFileSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import http2 from 'node:http2'
import net from 'node:net'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { HZ, childCpuFromStat, machineBusy, treeCpu } from './proc.js'

const run = promisify(execFile)
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const SRC = join(ROOT, 'bench', 'h2')
const arg = (flag: string, def: string): string => {
  const i = process.argv.indexOf(flag)
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : def
}
const SECS = Number(arg('-d', '10'))
/** requests per run instead of a duration (a quick check of the script) */
const COUNT = Number(arg('-n', '0'))
const ROUNDS = Number(arg('-r', '3'))
const ONLY = arg('--only', '')
const OUT = resolve(arg('--out', join(ROOT, 'bench', 'out', `h2-${new Date().toISOString().replace(/[:.]/g, '-')}`)))
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))
const log = (s: string): void => {
  const line = `${new Date().toISOString().slice(11, 19)} ${s}`
  process.stderr.write(line + '\n')
  appendFileSync(join(OUT, 'run.log'), line + '\n')
}

// ---- processes: only those started here are signalled, each by its own process group
const started: ChildProcess[] = []
function start (name: string, cmd: string, args: string[]): ChildProcess {
  mkdirSync(join(OUT, name, 'tmp'), { recursive: true })
  const fd = openSync(join(OUT, name, 'stdout.log'), 'a')
  const child = spawn(cmd, args, { cwd: join(OUT, name), stdio: ['ignore', fd, fd], detached: true })
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

function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => { const p = (s.address() as net.AddressInfo).port; s.close(() => resolve(p)) })
  })
}

function render (template: string, name: string, vars: Record<string, string | number>): string {
  let text = readFileSync(join(SRC, template), 'utf8')
  for (const [k, v] of Object.entries(vars)) text = text.replaceAll(`@${k}@`, String(v))
  mkdirSync(join(OUT, name, 'tmp'), { recursive: true })
  const out = join(OUT, name, template.replace(/\.in$/, ''))
  writeFileSync(out, text)
  return out
}

// ---- one request over h2 (TLS or h2c) for the preflight: status, body and trailers
function h2Once (url: string, headers: http2.OutgoingHttpHeaders, body: Buffer | null): Promise<{ status: number, body: Buffer, trailers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const s = http2.connect(url, { rejectUnauthorized: false })
    s.on('error', reject)
    const req = s.request(headers, { endStream: body === null })
    const parts: Buffer[] = []
    let status = 0
    let trailers: http2.IncomingHttpHeaders = {}
    req.on('response', (h) => { status = Number(h[':status']); if (h['grpc-status'] !== undefined) trailers = h })
    req.on('trailers', (t) => { trailers = t })
    req.on('data', (d: Buffer) => parts.push(d))
    req.on('end', () => { s.close(); resolve({ status, body: Buffer.concat(parts), trailers }) })
    req.on('error', reject)
    if (body !== null) req.end(body)
  })
}

async function retry<T> (what: string, f: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try { return await f() } catch (err) { if (i > 50) throw new Error(`${what}: ${(err as Error).message}`) }
    await sleep(200)
  }
}

// ---- the loads
interface Target { readonly label: string, readonly peer: string, readonly url: string, pid: number }
interface Load { readonly name: string, readonly args: string[], readonly targets: Target[], readonly ref: string[] }
interface Result { round: number, load: string, target: string, rps: number, perCpu: number, p99ms: number, proxyS: number, backendS: number, clientS: number, machineS: number, secs: number }

/** h2load's per-request log (start µs, status, duration µs): the 99th percentile of the 2xx, ms */
function p99 (file: string): number {
  const ds = readFileSync(file, 'utf8').split('\n').map((l) => l.split('\t')).filter((f) => f[1]?.startsWith('2')).map((f) => Number(f[2]))
  ds.sort((a, b) => a - b)
  return ds.length === 0 ? NaN : ds[Math.min(ds.length - 1, Math.floor(ds.length * 0.99))]! / 1000
}

async function once (round: number, load: Load, t: Target, backendPid: number): Promise<Result> {
  const logFile = join(OUT, `h2load-${load.name}-${t.label}.tsv`)
  const size = COUNT > 0 ? ['-n', String(COUNT)] : ['-D', String(SECS)]
  const args = ['-c', '64', ...size, ...load.args, '--log-file', logFile, t.url]
  const p0 = treeCpu(t.pid)
  const b0 = treeCpu(backendPid)
  const m0 = machineBusy()
  // the shell waits for h2load, then its own stat holds h2load's CPU (cutime + cstime)
  const r = await run('sh', ['-c', `h2load "$@" > "${logFile}.out" 2>&1; cat /proc/$$/stat`, 'sh', ...args], { timeout: (SECS + 60) * 1000 })
  const machineS = machineBusy() - m0
  const proxyS = treeCpu(t.pid) - p0
  const backendS = treeCpu(backendPid) - b0
  const out = readFileSync(`${logFile}.out`, 'utf8')
  const ok = /requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded/.exec(out)
  const fin = /finished in ([\d.]+)(m?s)/.exec(out)
  if (ok === null || fin === null) throw new Error(`h2load ${args.join(' ')}: ${out}`)
  if (/, [1-9]\d* failed|, [1-9]\d* errored/.test(out)) log(`  h2load reported failures: ${/requests: .*/.exec(out)![0]}`)
  const secs = Number(fin[1]) / (fin[2] === 'ms' ? 1000 : 1)
  const n = Number(ok[1])
  if (n === 0) log(`  no request succeeded against ${t.label} (${args.join(' ')}): too short a run for its connections to open?`)
  return { round, load: load.name, target: t.label, rps: n / secs, perCpu: n / Math.max(proxyS, 1 / HZ), p99ms: p99(logFile), proxyS, backendS, clientS: childCpuFromStat(r.stdout), machineS, secs }
}

const median = (xs: number[]): number => {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b)
  const n = s.length
  return n === 0 ? NaN : n % 2 === 1 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2
}

function summary (loads: Load[], results: Result[]): string {
  const lines = [`Medians over ${ROUNDS} rounds of ${COUNT > 0 ? `${COUNT} requests` : `${SECS} s`}; ÷ best: per round, requests per proxy CPU-second ÷ the best of the reference targets in that round.`, '']
  for (const l of loads) {
    lines.push(`${l.name} (÷ best of ${l.ref.join(', ')})`, '', '| target | requests/s | requests per proxy CPU-s | ÷ best | p99 ms | proxy CPU (cores) |', '|---|---|---|---|---|---|')
    for (const t of l.targets) {
      const mine = results.filter((r) => r.load === l.name && r.target === t.label)
      const ratio = median(mine.map((r) => r.perCpu / Math.max(...results.filter((x) => x.load === l.name && x.round === r.round && l.ref.includes(x.target)).map((x) => x.perCpu))))
      lines.push(`| ${t.label} | ${median(mine.map((r) => r.rps)).toFixed(0)} | ${median(mine.map((r) => r.perCpu)).toFixed(0)} | ${ratio.toFixed(2)} | ${median(mine.map((r) => r.p99ms)).toFixed(1)} | ${median(mine.map((r) => r.proxyS / r.secs)).toFixed(2)} |`)
    }
    const mine = results.filter((r) => r.load === l.name)
    const other = median(mine.map((r) => (r.machineS - r.proxyS - r.backendS - r.clientS) / r.secs))
    lines.push('', `noise: machine busy ${median(mine.map((r) => r.machineS / r.secs)).toFixed(2)} cores, of which ${other.toFixed(2)} neither proxy, backend nor h2load (other work: figures are only as good as this is small)`, '')
  }
  return lines.join('\n')
}

async function main (): Promise<void> {
  mkdirSync(OUT, { recursive: true })
  const port = { backend: await freePort(), grpcBackend: await freePort() }
  const peers = { nginx: { h2: await freePort(), grpc: await freePort() }, haproxy: { h2: await freePort(), grpc: await freePort() }, lb: { h2: await freePort(), grpc: await freePort(), h1: await freePort() }, floor: { h2: await freePort(), grpc: await freePort(), fwd: await freePort() } }
  const certs = join(OUT, 'certs')
  execFileSync('bash', [join(ROOT, 'conf', 'make-cert.sh'), certs, 'localhost'], { stdio: 'ignore' })
  writeFileSync(join(certs, 'haproxy.pem'), readFileSync(join(certs, 'lb.crt'), 'utf8') + readFileSync(join(certs, 'lb.key'), 'utf8'))
  writeFileSync(join(OUT, 'meta.json'), JSON.stringify({
    date: new Date().toISOString(), secs: SECS, count: COUNT, rounds: ROUNDS, node: process.version, nproc: Number(execFileSync('nproc', { encoding: 'utf8' })),
    nginx: (await run('nginx', ['-v'])).stderr.trim(), haproxy: execFileSync('haproxy', ['-v'], { encoding: 'utf8' }).split('\n')[0], h2load: execFileSync('h2load', ['--version'], { encoding: 'utf8' }).trim(),
  }, null, 2))

  const backend = start('backend', 'nginx', ['-p', join(OUT, 'backend') + '/', '-e', 'error.log', '-c', render('backend-nginx.conf.in', 'backend', { PORT: port.backend }), '-g', 'daemon off;'])
  const grpcBackend = start('grpc-backend', process.execPath, [join(ROOT, 'dist', 'bench', 'h2', 'grpc-backend.js'), String(port.grpcBackend)])
  const vars = (p: { h2: number, grpc: number, h1?: number }, name: string): Record<string, string | number> =>
    ({ PORT: p.h2, GRPC_PORT: p.grpc, H1_PORT: p.h1 ?? 0, BACKEND_PORT: port.backend, GRPC_BACKEND_PORT: port.grpcBackend, CERTS: certs, STATE: join(OUT, name, 'state') })
  const pid = {
    nginx: start('nginx', 'nginx', ['-p', join(OUT, 'nginx') + '/', '-e', 'error.log', '-c', render('nginx.conf.in', 'nginx', vars(peers.nginx, 'nginx')), '-g', 'daemon off;']).pid!,
    haproxy: start('haproxy', 'haproxy', ['-db', '-f', render('haproxy.cfg.in', 'haproxy', vars(peers.haproxy, 'haproxy'))]).pid!,
    lb: start('lb', process.execPath, [join(ROOT, 'dist', 'core', 'cli.js'), 'run', '-c', render('lb.toml.in', 'lb', vars(peers.lb, 'lb'))]).pid!,
    floor: start('floor', process.execPath, [join(ROOT, 'dist', 'bench', 'h2', 'floor-h2.js'), String(peers.floor.h2), String(peers.floor.grpc), String(port.grpcBackend),
      join(certs, 'lb.crt'), join(certs, 'lb.key'), String(peers.floor.fwd), String(port.backend)]).pid!,
  }

  // preflight: every target answers what the backends serve
  const grpcBody = Buffer.concat([Buffer.from([0, 0, 0, 0, 16]), Buffer.from('0123456789abcdef')]) // a 5-byte prefix, then 16 bytes
  writeFileSync(join(OUT, 'grpc-body.bin'), grpcBody)
  const grpcHeaders = { ':method': 'POST', ':path': '/bench.Echo/Unary', 'content-type': 'application/grpc', te: 'trailers' }
  for (const [name, p] of Object.entries(peers)) {
    const small = await retry(`${name} h2`, () => h2Once(`https://127.0.0.1:${p.h2}`, { ':path': '/' }, null))
    const big = await h2Once(`https://127.0.0.1:${p.h2}`, { ':path': '/big' }, null)
    const g = await retry(`${name} gRPC`, async () => {
      const a = await h2Once(`http://127.0.0.1:${p.grpc}`, grpcHeaders, grpcBody)
      if (a.status !== 200) throw new Error(`status ${a.status}`) // the gRPC server may still be starting
      return a
    })
    if (small.body.toString() !== '{"status":"ok"}\n' || big.body.length !== 4096 || !g.body.equals(grpcBody) || g.trailers['grpc-status'] !== '0') {
      throw new Error(`preflight ${name}: / ${JSON.stringify(small.body.toString())}, /big ${big.body.length} bytes, gRPC ${g.status} ${g.body.length} bytes, grpc-status ${String(g.trailers['grpc-status'])}`)
    }
    log(`started ${name} (pid ${pid[name as keyof typeof pid]}): h2 on ${p.h2}, gRPC on ${p.grpc}: preflight ok`)
  }
  const fwdSmall = await retry('floor-fwd h2', () => h2Once(`https://127.0.0.1:${peers.floor.fwd}`, { ':path': '/' }, null))
  const fwdBig = await h2Once(`https://127.0.0.1:${peers.floor.fwd}`, { ':path': '/big' }, null)
  if (fwdSmall.body.toString() !== '{"status":"ok"}\n' || fwdBig.body.length !== 4096) throw new Error(`preflight floor-fwd: / ${JSON.stringify(fwdSmall.body.toString())}, /big ${fwdBig.body.length} bytes`)

  const h2 = (path: string): Target[] => [
    ...(['nginx', 'haproxy', 'lb', 'floor'] as const).map((n) => ({ label: n, peer: n, url: `https://127.0.0.1:${peers[n].h2}${path}`, pid: pid[n] })),
    { label: 'floor-fwd', peer: 'floor', url: `https://127.0.0.1:${peers.floor.fwd}${path}`, pid: pid.floor },
  ]
  const loads: Load[] = [
    { name: 'h2-16B', args: ['-m', '10'], targets: h2('/'), ref: ['nginx', 'haproxy'] },
    { name: 'h2-4KiB', args: ['-m', '10'], targets: h2('/big'), ref: ['nginx', 'haproxy'] },
    {
      name: 'h1-tls-16B',
      args: ['--h1'],
      targets: [{ label: 'lb http2 off', peer: 'lb', url: `https://127.0.0.1:${peers.lb.h1}/`, pid: pid.lb }, { label: 'lb http2 on', peer: 'lb', url: `https://127.0.0.1:${peers.lb.h2}/`, pid: pid.lb }],
      ref: ['lb http2 off'],
    },
    {
      name: 'grpc-unary',
      args: ['-m', '10', '-d', join(OUT, 'grpc-body.bin'), '-H', 'content-type: application/grpc', '-H', 'te: trailers'],
      targets: (['nginx', 'haproxy', 'lb', 'floor'] as const).map((n) => ({ label: n, peer: n, url: `http://127.0.0.1:${peers[n].grpc}/bench.Echo/Unary`, pid: pid[n] })),
      ref: ['nginx', 'haproxy'],
    },
  ].filter((l) => ONLY === '' || ONLY.split(',').includes(l.name))

  // warm-up (JIT, TLS session caches, upstream pools), not recorded
  if (COUNT === 0) for (const l of loads) for (const t of l.targets) await run('h2load', ['-c', '64', '-D', '2', ...l.args, t.url], { timeout: 60_000 })

  const results: Result[] = []
  for (let round = 1; round <= ROUNDS; round++) {
    for (const l of loads) {
      for (const t of round % 2 === 1 ? l.targets : [...l.targets].reverse()) {
        const r = await once(round, l, t, l.name === 'grpc-unary' ? grpcBackend.pid! : backend.pid!)
        results.push(r)
        appendFileSync(join(OUT, 'results.jsonl'), JSON.stringify(r) + '\n')
        log(`r${round} ${l.name.padEnd(11)} ${t.label.padEnd(13)} ${r.rps.toFixed(0).padStart(7)} req/s  ${r.perCpu.toFixed(0).padStart(7)} per proxy CPU-s  p99 ${r.p99ms.toFixed(1)} ms`)
        await sleep(500)
      }
    }
  }
  const text = summary(loads, results)
  writeFileSync(join(OUT, 'summary.md'), text)
  process.stdout.write('\n' + text + `\nresults: ${OUT}\n`)
}

main().then(stopAll, async (err: Error) => {
  process.stderr.write(`bench/h2: ${err.stack ?? err.message}\n`)
  await stopAll()
  process.exitCode = 1
})
process.on('SIGINT', () => { void stopAll().then(() => process.exit(130)) })
