// Per-round ratios of two targets measured in the same run: requests per
// CPU-second of A against B, median and range over rounds, per cell (body and
// connection count of the harness's results.jsonl, ../shared/bench/run.sh; or
// load of bench/e2e/tls-ws.ts's results.jsonl). Used for lb on one uWS build
// against lb on another (bench/RESULTS.md).
//
//   node bench/e2e/pair-ratio.js OUT/results.jsonl [A=lb] [B=lb-old]
import { readFileSync } from 'node:fs'

const [file, a = 'lb', b = 'lb-old'] = process.argv.slice(2)
if (file === undefined) {
  process.stderr.write('usage: node bench/e2e/pair-ratio.js results.jsonl [A] [B]\n')
  process.exit(2)
}
// the harness's records, or tls-ws.ts's ({round, scenario, peer, rate, cpuS}) brought to the same shape
const rows = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  .map((r) => r.scenario === undefined ? r : { kind: 'measure', ok: true, round: r.round, proxy: r.peer, body: r.scenario, conns: '', rps: r.rate, req_per_cpu_s: r.rate / r.cpuS, lat_ms: { p99: NaN } })
  .filter((r) => r.kind === 'measure' && r.ok)
const median = (xs) => [...xs].sort((p, q) => p - q)[(xs.length - 1) >> 1]
const cells = new Map()
for (const r of rows) {
  const k = r.conns === '' ? r.body : `${r.body} c${r.conns}`
  if (!cells.has(k)) cells.set(k, new Map())
  cells.get(k).set(`${r.round}/${r.proxy}`, r)
}
console.log(`| cell | ${a} / ${b}: req per CPU-s, median (min–max) | req/s | p99 ms ${a} · ${b} |`)
console.log('|---|---:|---:|---:|')
for (const [k, m] of cells) {
  const rounds = [...new Set([...m.keys()].map((x) => x.split('/')[0]))]
  const pairs = rounds.map((n) => [m.get(`${n}/${a}`), m.get(`${n}/${b}`)]).filter(([x, y]) => x && y)
  const cpu = pairs.map(([x, y]) => x.req_per_cpu_s / y.req_per_cpu_s)
  const rps = pairs.map(([x, y]) => x.rps / y.rps)
  const fmt = (v) => v.toFixed(2)
  console.log(`| ${k} | ${fmt(median(cpu))} (${fmt(Math.min(...cpu))}–${fmt(Math.max(...cpu))}) | ${fmt(median(rps))} | ` +
    `${median(pairs.map(([x]) => x.lat_ms.p99)).toFixed(1)} · ${median(pairs.map(([, y]) => y.lat_ms.p99)).toFixed(1)} |`)
}
