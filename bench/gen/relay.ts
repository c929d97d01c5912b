// The generation gateway's relay cost: streams from an OpenAI-shaped model
// server (bench/gen/fake-model-server.ts, a child process: "fast" sends its
// tokens as fast as it can, "paced" one every 20 ms) read straight from it and
// through lb (`lb run`, the server in [[generation.servers]], a client's
// /v1/chat/completions through the data plane and the generation service), in
// alternating rounds of the same run. Per concurrency: tokens per second through
// lb ÷ straight (goal ≥ 0.97), the time to first token lb adds (median and p99
// of through − median straight; goal < 1 ms and < 5 ms) and lb's CPU per 1,000
// relayed tokens (its process: workers, control plane and generation service), and how busy the machine was
// (all its CPUs, /proc/stat) through lb and straight: at 100% the ratio is the machine's bound, not lb's.
//
//   npm run build && node dist/bench/gen/relay.js [--rounds 3] [--conc 1,64,1000] [--tokens 200] [--mode fast|paced|both] [--ttft 200]
//     [--relay worker|service|both] [--against DIR] [--floor]
//
// --relay: [generation] relay of the lb measured (default "worker": the data-plane worker relays the reply
// itself; "service": through the generation service's socket and main thread); "both" runs one lb of each
// against the same server, measured in the same rounds (the order rotates round by round).
// --against DIR: each lb measured is also run from another checkout's build (DIR, built: `npx tsc -p .` there),
// in the same rounds: the A/B of a change to the gateway, labelled "RELAY @ DIR".
// --floor: the byte relay (byte-relay.ts) is measured in the throughput rounds too, as one more way: what any
// relay process costs in tokens/s and CPU per token here, beside lb's.
//
// --ttft N: before the throughput rounds, N one-token streams one at a time,
// alternating straight, through lb's generation gateway, through lb's plain
// HTTP proxy to the same server (a [services] route, no generation service) and
// through a byte relay (byte-relay.ts: the floor of any relay process here),
// and through each gateway again with a key that has limits (its budget is
// checked and charged on the records in shared memory, under their lock):
// the time to first token each adds, from N samples each rather than from the
// throughput rounds' few first tokens (one per stream at one stream), and what
// the data plane's hop alone costs beside what the gateway's costs.
//
// Needs a quiet machine (bench/RESULTS.md, "How to read the noise"): the client,
// the server and lb share its cores.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Agent, request } from 'undici'
import { tokenHash } from '../../core/auth/token-digest.js'

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..')
const args = process.argv.slice(2)
const opt = (name: string, def: string): string => { const i = args.indexOf(name); return i >= 0 ? args[i + 1]! : def }
const ROUNDS = Number(opt('--rounds', '3'))
const CONC = opt('--conc', '1,64,1000').split(',').map(Number)
const TOKENS = Number(opt('--tokens', '200'))
const MODES = opt('--mode', 'both') === 'both' ? ['fast', 'paced'] : [opt('--mode', 'fast')]
const TTFT_N = Number(opt('--ttft', '0'))
const RELAY = opt('--relay', 'worker')
if (!['worker', 'service', 'both'].includes(RELAY)) throw new Error(`--relay: "worker", "service" or "both", not ${JSON.stringify(RELAY)}`)
const RELAYS = RELAY === 'both' ? ['worker', 'service'] : [RELAY]
const AGAINST = opt('--against', '')
/** The lbs measured, by label: each relay from this build and, with --against, from another checkout's (an A/B in one run). */
const LBS = RELAYS.flatMap((relay) => [
  { label: relay, relay, root: ROOT },
  ...(AGAINST === '' ? [] : [{ label: `${relay} @ ${AGAINST}`, relay, root: resolve(AGAINST) }]),
])
const FLOOR = args.includes('--floor') ? 'byte relay (floor)' : ''
const LABELS = [...LBS.map((l) => l.label), ...(FLOOR === '' ? [] : [FLOOR])]

const ticks = (pid: number): number => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const p = f.slice(f.lastIndexOf(')') + 2).split(' ')
  return Number(p[11]) + Number(p[12]) // utime + stime, in clock ticks (100 per second)
}

function waitLine (proc: ChildProcess, re: RegExp, what: string): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let out = ''
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${out}`)), 30_000)
    const on = (d: Buffer): void => {
      out += d.toString()
      const m = re.exec(out)
      if (m !== null) { clearTimeout(timer); resolve(m) }
    }
    proc.stdout?.on('data', on)
    proc.stderr?.on('data', on)
  })
}

/** The machine's CPU time so far, busy and all, in ticks (/proc/stat's first line). */
function machine (): { busy: number, all: number } {
  const f = readFileSync('/proc/stat', 'utf8')
  const v = f.slice(0, f.indexOf('\n')).split(/\s+/).slice(1).map(Number)
  const all = v.reduce((a, b) => a + b, 0)
  return { busy: all - v[3]! - v[4]!, all } // idle and iowait are not busy
}

interface Run { tokens: number, ms: number, ttft: number[], busy: number }

/** requests answered other than 200 over the whole run (printed at the end: a ratio over failures means nothing) */
let failed = 0

/** `conc` streams at once of TOKENS tokens each, from base; tokens counted from the SSE content chunks. */
async function load (base: string, conc: number, agent: Agent): Promise<Run> {
  const ttft: number[] = []
  let tokens = 0
  const m0 = machine()
  const t0 = performance.now()
  await Promise.all(Array.from({ length: conc }, async () => {
    const s = performance.now()
    const res = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake', stream: true, max_tokens: TOKENS, messages: [{ role: 'user', content: 'go' }] }),
    })
    let first = true
    let rest = ''
    for await (const chunk of res.body) {
      rest += (chunk as Buffer).toString('utf8')
      let i: number
      while ((i = rest.indexOf('\n\n')) >= 0) {
        const ev = rest.slice(0, i)
        rest = rest.slice(i + 2)
        if (!/"content":"[^"]/.test(ev)) continue // a content piece (the role chunk's empty content is none)
        tokens++
        // time to the first token, as a client sees it: the first content piece, not the first bytes
        if (first) { ttft.push(performance.now() - s); first = false }
      }
    }
    if (res.statusCode !== 200) failed++
  }))
  const m1 = machine()
  return { tokens, ms: performance.now() - t0, ttft, busy: (m1.busy - m0.busy) / (m1.all - m0.all) }
}

/** The key of a consumer with limits (rpm, far above what the bench sends): `config`. */
const LIMITED_KEY = 'lb-bench-limited-key-0123456789abcdef'

/** One stream of one token from `url` (a base with the API path), with `key` when not '': ms to its first content piece. */
async function firstToken (url: string, agent: Agent, key = ''): Promise<number> {
  const s = performance.now()
  const res = await request(url, {
    method: 'POST',
    dispatcher: agent,
    headers: key === '' ? { 'content-type': 'application/json' } : { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'fake', stream: true, max_tokens: 1, messages: [{ role: 'user', content: 'go' }] }),
  })
  let t = NaN
  for await (const chunk of res.body) if (Number.isNaN(t) && /"content":"[^"]/.test((chunk as Buffer).toString('utf8'))) t = performance.now() - s
  if (res.statusCode !== 200) failed++
  return t
}

/**
 * TTFT_N one-token streams one at a time, the ways in turn; prints the added ms of each gateway (per relay, without
 * a key and with LIMITED_KEY), the plain proxy and the byte relay.
 */
async function ttftPhase (mode: string, direct: string, throughs: Record<string, string>, floor: string, agent: Agent): Promise<void> {
  const ways: Record<string, [url: string, key: string]> = { direct: [`${direct}/v1/chat/completions`, ''] }
  for (const [relay, base] of Object.entries(throughs)) {
    ways[`generation gateway, relay = ${relay}`] = [`${base}/v1/chat/completions`, '']
    ways[`generation gateway, relay = ${relay}, a key with limits`] = [`${base}/v1/chat/completions`, LIMITED_KEY]
  }
  ways['plain proxy (same lb)'] = [`${Object.values(throughs)[0]!}/plain/v1/chat/completions`, '']
  ways['byte relay (floor)'] = [`${floor}/v1/chat/completions`, '']
  const got: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((w) => [w, []]))
  for (let i = 0; i < TTFT_N + 10; i++) {
    for (const w of Object.keys(ways)) {
      const t = await firstToken(ways[w]![0], agent, ways[w]![1])
      if (i >= 10) got[w]!.push(t) // the first ten warm the code paths
    }
  }
  const base = median(got.direct!)
  for (const w of Object.keys(ways)) {
    if (w === 'direct') continue
    ttftRows.push(`| ${mode} | ${w} | ${TTFT_N} | ${base.toFixed(2)} | ${(median(got[w]!) - base).toFixed(2)} | ${(p99(got[w]!) - base).toFixed(2)} |`)
  }
}
const ttftRows: string[] = []

/** a share as a percentage; '–' for a run too short for /proc/stat's ticks (10 ms) */
const pct = (x: number): string => Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : '–'
const median = (xs: number[]): number => { const v = [...xs].sort((a, b) => a - b); return v.length === 0 ? NaN : v[v.length >> 1]! }
const p99 = (xs: number[]): number => { const v = [...xs].sort((a, b) => a - b); return v.length === 0 ? NaN : v[Math.min(v.length - 1, Math.floor(v.length * 0.99))]! }

/** lb's config: the fake server as a generation server behind /v1/, and straight behind /plain/ (the plain proxy). */
const config = (socket: string, port: number, relay: string): string => `[global]
access_log = "off"
max_connections = 20000
[entrypoints.web]
address = "127.0.0.1:0"
[routers.api]
rule = "PathPrefix(\`/v1/\`)"
service = "api"
[services.api]
kind = "generate"
[routers.plain]
rule = "PathPrefix(\`/plain/\`)"
service = "plain"
middlewares = ["unplain"]
[middlewares.unplain]
type = "stripPrefix"
prefixes = ["/plain"]
[services.plain]
servers = [{ address = "127.0.0.1:${port}" }]
[services.plain.health_check]
type = "tcp"
[generation]
socket = "${socket}"
builtin_model = false
ollama_models = "off"
request_timeout = "10m"
relay = "${relay}"
[generation.auth]
required = false
[[generation.keys]]
consumer = "limited"
hash = "${tokenHash(LIMITED_KEY)}"
rpm = 1000000000
[[generation.servers]]
name = "fake"
kind = "openai"
url = "http://127.0.0.1:${port}"
refresh = "1h"
`

async function main (): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'lb-bench-relay-'))
  const procs: ChildProcess[] = []
  try {
    for (const mode of MODES) {
      const server = spawn(process.execPath, [join(ROOT, 'dist', 'bench', 'gen', 'fake-model-server.js'), mode], { stdio: ['ignore', 'pipe', 'inherit'] })
      procs.push(server)
      const port = Number((await waitLine(server, /listening (\d+)/, 'the fake model server'))[1])
      const direct = `http://127.0.0.1:${port}`
      /** label -> lb's base URL and pid */
      const lbs: Record<string, { base: string, pid: number }> = {}
      for (const [i, { label, relay, root }] of LBS.entries()) {
        const conf = join(dir, `lb-${mode}-${i}.toml`)
        writeFileSync(conf, config(join(dir, `gen-${mode}-${i}.sock`), port, relay))
        const lb = spawn(process.execPath, [join(root, 'dist', 'core', 'cli.js'), 'run', '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] })
        procs.push(lb)
        const lbPort = Number((await waitLine(lb, /"msg":"listening","entrypoint":"web","address":"127\.0\.0\.1:(\d+)"/, 'lb'))[1])
        lbs[label] = { base: `http://127.0.0.1:${lbPort}`, pid: lb.pid! }
      }
      const relay = spawn(process.execPath, [join(ROOT, 'dist', 'bench', 'gen', 'byte-relay.js'), String(port)], { stdio: ['ignore', 'pipe', 'inherit'] })
      procs.push(relay)
      const floor = `http://127.0.0.1:${(await waitLine(relay, /listening (\d+)/, 'the byte relay'))[1]}`
      await new Promise((r) => setTimeout(r, 1500)) // the server's model list read once
      const agent = new Agent({ connections: 2000, pipelining: 0 })
      for (const { base } of Object.values(lbs)) await load(base, 8, agent) // warm-up
      await load(direct, 8, agent)
      if (TTFT_N > 0) await ttftPhase(mode, direct, Object.fromEntries(Object.entries(lbs).map(([k, v]) => [k, v.base])), floor, agent)
      if (FLOOR !== '') lbs[FLOOR] = { base: floor, pid: relay.pid! }
      const ways = ['direct', ...LABELS]
      for (const conc of CONC) {
        const ratios: Record<string, number[]> = Object.fromEntries(LABELS.map((x) => [x, []]))
        const ttfts: Record<string, number[]> = Object.fromEntries(ways.map((x) => [x, []]))
        const cpu: Record<string, number[]> = Object.fromEntries(LABELS.map((x) => [x, []]))
        const busy: Record<string, number[]> = Object.fromEntries(ways.map((x) => [x, []]))
        for (let r = 0; r < ROUNDS; r++) {
          // the order rotates: each way goes first, in the middle and last in turn
          const order = ways.map((_, i) => ways[(i + r) % ways.length]!)
          const res: Record<string, Run> = {}
          for (const which of order) {
            const lb = lbs[which]
            const c0 = lb === undefined ? 0 : ticks(lb.pid)
            res[which] = await load(lb === undefined ? direct : lb.base, conc, agent)
            if (lb !== undefined) cpu[which]!.push(((ticks(lb.pid) - c0) * 10) / (res[which].tokens / 1000)) // ms of CPU per 1,000 tokens
            ttfts[which]!.push(...res[which].ttft)
            busy[which]!.push(res[which].busy)
          }
          for (const relay of LABELS) {
            ratios[relay]!.push((res[relay]!.tokens / res[relay]!.ms) / (res.direct!.tokens / res.direct!.ms))
            process.stderr.write(`${mode} c${conc} round ${r + 1} relay ${relay}: through/direct ${ratios[relay]!.at(-1)!.toFixed(3)}, tokens ${res[relay]!.tokens}/${res.direct!.tokens}\n`)
          }
        }
        const base = median(ttfts.direct!)
        for (const relay of LABELS) {
          const rs = ratios[relay]!
          process.stdout.write(`| ${mode} | ${relay} | ${conc} | ${median(rs).toFixed(3)} (${Math.min(...rs).toFixed(3)}-${Math.max(...rs).toFixed(3)}) | ` +
            `${(median(ttfts[relay]!) - base).toFixed(2)} | ${(p99(ttfts[relay]!) - base).toFixed(2)} | ${median(cpu[relay]!).toFixed(1)} | ` +
            `${pct(median(busy[relay]!))} (straight ${pct(median(busy.direct!))}) |\n`)
        }
      }
      await agent.close()
      for (const p of procs) if (p !== server && p.exitCode === null) p.kill('SIGTERM')
      server.kill('SIGTERM')
    }
  } finally {
    for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
}

process.on('exit', () => {
  if (ttftRows.length > 0) process.stdout.write(`\n| server | through | one-token streams | straight TTFT, median ms | added, median ms | added, p99 ms |\n|---|---|---:|---:|---:|---:|\n${ttftRows.join('\n')}\n`)
  if (failed > 0) process.stdout.write(`${failed} requests were not answered 200\n`)
})
process.stdout.write('| server | relay | streams | tokens/s through lb ÷ straight, median (min-max) | TTFT added, median ms | TTFT added, p99 ms | lb CPU ms per 1,000 tokens | machine busy |\n|---|---|---:|---:|---:|---:|---:|---:|\n')
await main()
