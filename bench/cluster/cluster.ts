// Cluster mode against a real redis-server (bench/RESULTS.md "Cluster mode"):
//  1. requests per CPU-second of one node on a route limited with scope =
//     "cluster" against a route of the same node limited locally, alternately
//     in the same rounds (wrk, keep-alive; limits far above the load, so
//     every request passes: the cost measured is counting and syncing);
//  2. admitted requests against the theory for 1, 2 and 3 nodes: 150
//     requests from one source spread evenly over 10 s against 100 per 10 s
//     (theory: 100 whatever the number of nodes);
//  3. Redis commands per 1,000 requests (INFO commandstats before and after).
// -a tokenBucket runs the same with a token bucket (1: average and burst far
// above the load; 2: average 100 per 10 s, burst 100, theory min(150, 100 + 10
// per second)) to compare the buckets' leases with the sliding windows'.
// Run after `npm run build`: node dist/bench/cluster/cluster.js [-d SECONDS] [-r ROUNDS] [-a slidingWindow|tokenBucket]
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const CLI = join(ROOT, 'dist', 'core', 'cli.js')
const arg = (name: string, def: string): string => { const i = process.argv.indexOf(name); return i < 0 ? def : process.argv[i + 1]! }
const DURATION = Number(arg('-d', '5'))
const ROUNDS = Number(arg('-r', '3'))
const ALGORITHM = arg('-a', 'slidingWindow')
if (ALGORITHM !== 'slidingWindow' && ALGORITHM !== 'tokenBucket') throw new Error(`-a: slidingWindow or tokenBucket, not ${ALGORITHM}`)
const HZ = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())
const dir = mkdtempSync(join(tmpdir(), 'lb-bench-cluster-'))
const children: ChildProcess[] = []
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
let nextPort = 23000 + Math.floor(Math.random() * 20000)

function cleanup (): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) process.kill(c.pid!, 'SIGTERM')
}
process.on('exit', () => { cleanup(); rmSync(dir, { recursive: true, force: true }) })

function cpuSeconds (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) / HZ // utime + stime, all threads
}

async function waitFor (what: string, f: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  for (const end = Date.now() + ms; !(await f());) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}

async function startRedis (): Promise<{ port: number, client: Redis }> {
  const port = nextPort++
  const p = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  children.push(p)
  const client = new Redis({ port, host: '127.0.0.1', retryStrategy: () => 50 })
  client.on('error', () => {})
  await waitFor('redis', async () => await client.ping().catch(() => '') === 'PONG')
  return { port, client }
}

function startBackend (): Promise<number> {
  const server = http.createServer((_req, res) => res.end('ok'))
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)))
}

async function startNode (name: string, redisPort: number, backend: number, limit: number): Promise<{ port: number, pid: number }> {
  const port = nextPort++
  const file = join(dir, `${name}.toml`)
  // a bucket's largest: 10^6 per second (average over 10 s), burst 10^6
  const terms = ALGORITHM === 'tokenBucket' ? `average = ${Math.min(limit, 10_000_000)}\nburst = ${Math.min(limit, 1_000_000)}` : `limit = ${limit}`
  const rl = (n: string, scope: string): string => `[middlewares.${n}]\ntype = "rateLimit"\nalgorithm = "${ALGORITHM}"\n${terms}\nperiod = "10s"\nscope = "${scope}"\n`
  writeFileSync(file, `[global]\nworkers = 2\naccess_log = "off"\nstate_dir = "${join(dir, name)}"\n
[entrypoints.web]\naddress = "127.0.0.1:${port}"\n
[routers.cluster]\nrule = "PathPrefix(\`/cluster\`)"\nservice = "web"\nmiddlewares = ["c"]\n
[routers.local]\nrule = "PathPrefix(\`/local\`)"\nservice = "web"\nmiddlewares = ["l"]\n
${rl('c', 'cluster')}${rl('l', 'local')}
[services.web]\n[[services.web.servers]]\naddress = "127.0.0.1:${backend}"\ncheck = false\n
[cluster]\nurl = "redis://127.0.0.1:${redisPort}"\nnode = "${name}"\n`)
  const p = spawn(process.execPath, [CLI, 'run', '-c', file], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] })
  children.push(p)
  let err = ''
  p.stderr!.on('data', (d: Buffer) => { err += d.toString() })
  await waitFor(`node ${name}`, () => /"msg":"ready"/.test(err) && /Redis reachable/.test(err))
  return { port, pid: p.pid! }
}

// async: the backend runs in this process and must answer while wrk runs
async function wrk (url: string): Promise<number> {
  const { stdout: out } = await promisify(execFile)('wrk', ['-t1', '-c32', `-d${DURATION}s`, url], { encoding: 'utf8' })
  if (/Non-2xx|Socket errors/.test(out)) throw new Error(`wrk saw errors: ${out}`)
  return Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1])
}

/** Commands Redis counted (INFO commandstats; those a script runs count too), the bench's own INFO aside. */
async function commands (r: Redis): Promise<number> {
  const info = await r.info('commandstats')
  let n = 0
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) if (m[1] !== 'info') n += Number(m[2])
  return n
}

/** Round trips: commands sent by clients (a script call is one, whatever it runs). */
async function roundTrips (r: Redis): Promise<number> {
  const info = await r.info('commandstats')
  const inner = new Set(['hset', 'hgetall', 'hdel', 'pexpire', 'time', 'zadd', 'zremrangebyscore', 'zrange', 'hget', 'publish', 'info'])
  let n = 0
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) if (!inner.has(m[1]!)) n += Number(m[2])
  return n
}

function get (port: number, path: string, from: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path, localAddress: from, agent: false }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode!)) }).on('error', reject)
  })
}

async function main (): Promise<void> {
  const redis = await startRedis()
  const backend = await startBackend()
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  // 1. CPU cost of the cluster scope, same node, same rounds
  const a = await startNode('a', redis.port, backend, 1_000_000_000)
  const ratios: number[] = []
  let perThousand = 0
  for (const path of ['/local', '/cluster']) await wrk(`http://127.0.0.1:${a.port}${path}`) // warm-up, not counted
  for (let round = 1; round <= ROUNDS; round++) {
    const rate: Record<string, number> = {}
    for (const path of round % 2 === 1 ? ['/local', '/cluster'] : ['/cluster', '/local']) {
      const cpu0 = cpuSeconds(a.pid)
      const cmd0 = await commands(redis.client)
      const rt0 = await roundTrips(redis.client)
      const rps = await wrk(`http://127.0.0.1:${a.port}${path}`)
      const cpu = cpuSeconds(a.pid) - cpu0
      const cmds = await commands(redis.client) - cmd0
      const trips = await roundTrips(redis.client) - rt0
      rate[path] = (rps * DURATION) / cpu
      if (path === '/cluster') perThousand = (cmds / (rps * DURATION)) * 1000
      console.log(`round ${round} ${path}: ${rps.toFixed(0)} req/s, ${rate[path]!.toFixed(0)} req per CPU-second${path === '/cluster' ? `, Redis commands ${cmds} (${perThousand.toFixed(3)} per 1,000 requests), round trips ${trips} (${((trips / (rps * DURATION)) * 1000).toFixed(3)} per 1,000)` : ''}`)
    }
    ratios.push(rate['/cluster']! / rate['/local']!)
  }
  console.log(`cluster / local requests per CPU-second: median ${median(ratios).toFixed(3)} (${ratios.map((r) => r.toFixed(3)).join(', ')})`)
  // 2. admitted against the theory, 1..3 nodes (a is the first; a fresh source per case)
  const nodes = [a, await startNode('b', redis.port, backend, 100), await startNode('c', redis.port, backend, 100)]
  // a's cluster limit must be 100 too: a new node a2 replaces it in the list
  nodes[0] = await startNode('a2', redis.port, backend, 100)
  await waitFor('4 live nodes', async () => (await redis.client.zcard('lb:nodes')) >= 4)
  process.kill(a.pid, 'SIGTERM')
  await waitFor('3 live nodes', async () => (await redis.client.zcard('lb:nodes')) === 3)
  for (const k of [1, 2, 3]) {
    const from = `127.0.0.${20 + k}`
    const cmd0 = await commands(redis.client)
    const rt0 = await roundTrips(redis.client)
    const start = Date.now()
    const pending: Array<Promise<number>> = []
    for (let i = 0; i < 150; i++) {
      const wait = start + i * 66 - Date.now()
      if (wait > 0) await sleep(wait)
      pending.push(get(nodes[i % k]!.port, '/cluster', from))
    }
    const statuses = await Promise.all(pending)
    const cmds = await commands(redis.client) - cmd0
    const trips = await roundTrips(redis.client) - rt0
    const theory = ALGORITHM === 'tokenBucket' ? `min(150, 100 + 10 per second) = ${Math.min(150, 100 + (Date.now() - start) / 100).toFixed(0)}` : '100'
    console.log(`${k} node(s), 150 requests in 10 s against 100 per 10 s: admitted ${statuses.filter((s) => s === 200).length} (theory ${theory}), others ${statuses.filter((s) => s !== 200 && s !== 429).length}; Redis commands ${cmds}, round trips ${trips} in ${((Date.now() - start) / 1000).toFixed(1)} s (3 nodes running)`)
  }
  redis.client.disconnect()
}

main().then(() => process.exit(0), (err: Error) => { console.error(err); process.exit(1) })
