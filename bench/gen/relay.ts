// The generation gateway's relay cost: streams from an OpenAI-shaped model
// server (bench/gen/fake-model-server.ts, a child process: "fast" sends its
// tokens as fast as it can, "paced" one every 20 ms) read straight from it and
// through lb (`lb run`, the server in [[generation.servers]], a client's
// /v1/chat/completions through the data plane and the generation service), in
// alternating rounds of the same run. Per concurrency: tokens per second through
// lb ÷ straight (goal ≥ 0.97), the time to first token lb adds (median and p99
// of through − median straight; goal < 1 ms and < 5 ms) and lb's CPU per 1,000
// relayed tokens (its process: workers, control plane and generation service).
//
//   npm run build && node dist/bench/gen/relay.js [--rounds 3] [--conc 1,64,1000] [--tokens 200] [--mode fast|paced|both] [--ttft 200]
//
// --ttft N: before the throughput rounds, N one-token streams one at a time,
// alternating straight, through lb's generation gateway and through lb's plain
// HTTP proxy to the same server (a [services] route, no generation service):
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

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..')
const args = process.argv.slice(2)
const opt = (name: string, def: string): string => { const i = args.indexOf(name); return i >= 0 ? args[i + 1]! : def }
const ROUNDS = Number(opt('--rounds', '3'))
const CONC = opt('--conc', '1,64,1000').split(',').map(Number)
const TOKENS = Number(opt('--tokens', '200'))
const MODES = opt('--mode', 'both') === 'both' ? ['fast', 'paced'] : [opt('--mode', 'fast')]
const TTFT_N = Number(opt('--ttft', '0'))

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

interface Run { tokens: number, ms: number, ttft: number[] }

/** requests answered other than 200 over the whole run (printed at the end: a ratio over failures means nothing) */
let failed = 0

/** `conc` streams at once of TOKENS tokens each, from base; tokens counted from the SSE content chunks. */
async function load (base: string, conc: number, agent: Agent): Promise<Run> {
  const ttft: number[] = []
  let tokens = 0
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
  return { tokens, ms: performance.now() - t0, ttft }
}

/** One stream of one token from `url` (a base with the API path): ms to its first content piece. */
async function firstToken (url: string, agent: Agent): Promise<number> {
  const s = performance.now()
  const res = await request(url, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'fake', stream: true, max_tokens: 1, messages: [{ role: 'user', content: 'go' }] }),
  })
  let t = NaN
  for await (const chunk of res.body) if (Number.isNaN(t) && /"content":"[^"]/.test((chunk as Buffer).toString('utf8'))) t = performance.now() - s
  if (res.statusCode !== 200) failed++
  return t
}

/** TTFT_N one-token streams one at a time, the three ways in turn; prints the added ms of the gateway and of the plain proxy. */
async function ttftPhase (mode: string, direct: string, through: string, agent: Agent): Promise<void> {
  const ways = { direct: `${direct}/v1/chat/completions`, gateway: `${through}/v1/chat/completions`, proxy: `${through}/plain/v1/chat/completions` }
  const got: Record<keyof typeof ways, number[]> = { direct: [], gateway: [], proxy: [] }
  for (let i = 0; i < TTFT_N + 10; i++) {
    for (const w of Object.keys(ways) as Array<keyof typeof ways>) {
      const t = await firstToken(ways[w], agent)
      if (i >= 10) got[w].push(t) // the first ten warm the code paths
    }
  }
  const base = median(got.direct)
  for (const w of ['gateway', 'proxy'] as const) {
    ttftRows.push(`| ${mode} | ${w === 'gateway' ? 'generation gateway' : 'plain proxy (same lb)'} | ${TTFT_N} | ${base.toFixed(2)} | ${(median(got[w]) - base).toFixed(2)} | ${(p99(got[w]) - base).toFixed(2)} |`)
  }
}
const ttftRows: string[] = []

const median = (xs: number[]): number => { const v = [...xs].sort((a, b) => a - b); return v.length === 0 ? NaN : v[v.length >> 1]! }
const p99 = (xs: number[]): number => { const v = [...xs].sort((a, b) => a - b); return v.length === 0 ? NaN : v[Math.min(v.length - 1, Math.floor(v.length * 0.99))]! }

async function main (): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'lb-bench-relay-'))
  const procs: ChildProcess[] = []
  try {
    for (const mode of MODES) {
      const server = spawn(process.execPath, [join(ROOT, 'dist', 'bench', 'gen', 'fake-model-server.js'), mode], { stdio: ['ignore', 'pipe', 'inherit'] })
      procs.push(server)
      const port = Number((await waitLine(server, /listening (\d+)/, 'the fake model server'))[1])
      const conf = join(dir, `lb-${mode}.toml`)
      writeFileSync(conf, `[global]
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
socket = "${join(dir, `gen-${mode}.sock`)}"
builtin_model = false
ollama_models = "off"
request_timeout = "10m"
[[generation.servers]]
name = "fake"
kind = "openai"
url = "http://127.0.0.1:${port}"
refresh = "1h"
`)
      const lb = spawn(process.execPath, [join(ROOT, 'dist', 'core', 'cli.js'), 'run', '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] })
      procs.push(lb)
      const lbPort = Number((await waitLine(lb, /"msg":"listening","entrypoint":"web","address":"127\.0\.0\.1:(\d+)"/, 'lb'))[1])
      await new Promise((r) => setTimeout(r, 1500)) // the server's model list read once
      const direct = `http://127.0.0.1:${port}`
      const through = `http://127.0.0.1:${lbPort}`
      const agent = new Agent({ connections: 2000, pipelining: 0 })
      await load(through, 8, agent) // warm-up
      await load(direct, 8, agent)
      if (TTFT_N > 0) await ttftPhase(mode, direct, through, agent)
      for (const conc of CONC) {
        const ratios: number[] = []
        const dTtft: number[] = []
        const tTtft: number[] = []
        const cpu: number[] = []
        for (let r = 0; r < ROUNDS; r++) {
          const order = r % 2 === 0 ? ['direct', 'through'] : ['through', 'direct']
          const res: Record<string, Run> = {}
          for (const which of order) {
            const c0 = ticks(lb.pid!)
            res[which] = await load(which === 'direct' ? direct : through, conc, agent)
            if (which === 'through') cpu.push(((ticks(lb.pid!) - c0) * 10) / (res[which].tokens / 1000)) // ms of CPU per 1,000 tokens
          }
          ratios.push((res.through!.tokens / res.through!.ms) / (res.direct!.tokens / res.direct!.ms))
          dTtft.push(...res.direct!.ttft)
          tTtft.push(...res.through!.ttft)
          process.stderr.write(`${mode} c${conc} round ${r + 1}: through/direct ${ratios[ratios.length - 1]!.toFixed(3)}, tokens ${res.through!.tokens}/${res.direct!.tokens}\n`)
        }
        const base = median(dTtft)
        process.stdout.write(`| ${mode} | ${conc} | ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}) | ` +
          `${(median(tTtft) - base).toFixed(2)} | ${(p99(tTtft) - base).toFixed(2)} | ${median(cpu).toFixed(1)} |\n`)
      }
      await agent.close()
      lb.kill('SIGTERM')
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
process.stdout.write('| server | streams | tokens/s through lb ÷ straight, median (min-max) | TTFT added, median ms | TTFT added, p99 ms | lb CPU ms per 1,000 tokens |\n|---|---:|---:|---:|---:|---:|\n')
await main()
