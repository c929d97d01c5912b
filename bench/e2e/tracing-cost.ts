// What [tracing] costs per request: lb's requests per CPU-second (its own
// process, all threads, from /proc) with tracing off, at 1 % and at 100 %
// sampling, exporting to a local OTLP/HTTP sink, in one run. The variants
// alternate in every round (fresh lb processes), wrk drives them; the last
// column is each variant's requests per CPU-second over the "off" one of the
// same round, then the median over rounds. Requests carry no traceparent: lb
// starts every trace, so sample_rate alone decides.
//   npm run build && node dist/bench/e2e/tracing-cost.js [-d SECS] [-w SECS] [-c CONNS] [-r ROUNDS]
//   WORKERS=N in the environment (default 1). Needs wrk.
import { execFile } from 'node:child_process'
import http from 'node:http'
import type net from 'node:net'
import { promisify } from 'node:util'
import { startLbProc } from './lb-proc.js'

const run = promisify(execFile)
const arg = (flag: string, def: number): number => {
  const i = process.argv.indexOf(flag)
  return i < 0 ? def : Number(process.argv[i + 1])
}
const SECS = arg('-d', 10)
const WARM = arg('-w', 3)
const CONNS = arg('-c', 64)
const ROUNDS = arg('-r', 2)
const WORKERS = Number(process.env.WORKERS ?? 1)

const listen = async (server: http.Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `127.0.0.1:${(server.address() as net.AddressInfo).port}`
}

const backend = http.createServer((_req, res) => res.end('ok'))
backend.keepAliveTimeout = 120_000
const backendAddress = await listen(backend)

// the OTLP sink: counts the spans it is sent (the JSON is parsed, as a collector would)
let spans = 0
const sink = http.createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (d: Buffer) => chunks.push(d))
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString()) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: unknown[] }> }> }
    for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans += ss.spans.length
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
  })
})
sink.keepAliveTimeout = 120_000
const sinkAddress = await listen(sink)

const tracing = (rate: number): string => `[tracing]
sample_rate = ${rate}
flush_interval = "1s"
[tracing.otlp.http]
endpoint = "http://${sinkAddress}/v1/traces"
`
const VARIANTS = [
  { name: 'off', toml: '' },
  { name: '1%', toml: tracing(0.01) },
  { name: '100%', toml: tracing(1) },
] as const

async function wrk (port: number, secs: number): Promise<number> {
  const { stdout } = await run('wrk', ['-t', '1', '-c', String(CONNS), '-d', `${secs}s`, `http://127.0.0.1:${port}/`], { maxBuffer: 1 << 20 })
  const m = /(\d+) requests in/.exec(stdout)
  if (m === null) throw new Error(`wrk said: ${stdout}`)
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(stdout)
  if (errors !== null) throw new Error(`${errors[1]} failed requests: ${stdout}`)
  return Number(m[1])
}

interface Row { round: number, name: string, rps: number, cpu: number, perCpu: number, spans: number }
const rows: Row[] = []
console.log(`tracing cost: lb with ${WORKERS} worker(s), wrk -c ${CONNS}, ${SECS}s per load after ${WARM}s warm-up, ${ROUNDS} round(s)`)
for (let round = 1; round <= ROUNDS; round++) {
  // the order turns each round: no variant always runs first
  const order = VARIANTS.map((_, i) => VARIANTS[(i + round - 1) % VARIANTS.length]!)
  for (const v of order) {
    const lb = await startLbProc(backendAddress, WORKERS, v.toml)
    try {
      if (WARM > 0) await wrk(lb.port, WARM)
      const spans0 = spans
      const cpu0 = lb.cpu()
      const n = await wrk(lb.port, SECS)
      const cpu = lb.cpu() - cpu0
      await new Promise((resolve) => setTimeout(resolve, 1500)) // the last flush_interval's spans arrive
      rows.push({ round, name: v.name, rps: n / SECS, cpu, perCpu: n / cpu, spans: spans - spans0 })
    } finally {
      await lb.stop()
    }
  }
}

const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2 }
console.log('| round | tracing | req/s | lb CPU-s | req per CPU-s | spans received | vs off |')
console.log('|---:|---|---:|---:|---:|---:|---:|')
for (const r of rows) {
  const off = rows.find((x) => x.round === r.round && x.name === 'off')!
  console.log(`| ${r.round} | ${r.name} | ${r.rps.toFixed(0)} | ${r.cpu.toFixed(2)} | ${r.perCpu.toFixed(0)} | ${r.spans} | ${(r.perCpu / off.perCpu).toFixed(3)} |`)
}
for (const v of VARIANTS) {
  const ratios = rows.filter((r) => r.name === v.name).map((r) => r.perCpu / rows.find((x) => x.round === r.round && x.name === 'off')!.perCpu)
  console.log(`median req per CPU-s, ${v.name} / off: ${median(ratios).toFixed(3)}`)
}
backend.close()
sink.close()
