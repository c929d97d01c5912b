// Per-round ratios of two targets measured in the same run: requests per
// CPU-second of A against B, median and range over rounds, per cell (body and
// connection count of the harness's results.jsonl, ../shared/bench/run.sh; or
// load of bench/e2e/tls-ws.ts's results.jsonl). Several results files (runs
// with fresh processes, bench/e2e/ab.sh) pool their rounds, named RUN.ROUND.
// With --rounds, every round's ratios too, beside that round's noise: the CPU
// that neither wrk, the proxies nor the backend used while A and while B ran
// (bench/RESULTS.md, "A/B against a commit", says how to read it).
//
//   node bench/e2e/pair-ratio.js OUT/results.jsonl... [A=lb] [B=lb-old] [--rounds]
import { readFileSync } from 'node:fs'

const args = process.argv.slice(2)
const perRound = args.includes('--rounds')
const files = args.filter((x) => x.endsWith('.jsonl'))
const [a = 'lb', b = 'lb-old'] = args.filter((x) => x !== '--rounds' && !x.endsWith('.jsonl'))
if (files.length === 0) {
  process.stderr.write('usage: node bench/e2e/pair-ratio.js results.jsonl... [A] [B] [--rounds]\n')
  process.exit(2)
}
// the harness's records, or tls-ws.ts's ({round, scenario, peer, rate, cpuS}) brought to the same shape
const rows = files.flatMap((file, i) => readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
  .map((r) => r.scenario === undefined ? r : { kind: 'measure', ok: true, round: r.round, proxy: r.peer, body: r.scenario, conns: '', rps: r.rate, req_per_cpu_s: r.rate / r.cpuS, lat_ms: { p99: NaN } })
  .filter((r) => r.kind === 'measure' && r.ok)
  .map((r) => files.length === 1 ? r : { ...r, round: `${i + 1}.${r.round}` }))
const median = (xs) => { const v = [...xs].sort((p, q) => p - q); const m = v.length >> 1; return v.length % 2 === 1 ? v[m] : (v[m - 1] + v[m]) / 2 }
const fmt = (v) => v.toFixed(2)
/** % of the machine used by others during a run (the harness's "other CPU"), or NaN when not recorded */
const other = (r) => r.other_cpu_s === undefined ? NaN : 100 * r.other_cpu_s / (r.wall_s * (r.machine_cores || 2))
const cells = new Map()
for (const r of rows) {
  const k = r.conns === '' ? r.body : `${r.body} c${r.conns}`
  if (!cells.has(k)) cells.set(k, new Map())
  cells.get(k).set(`${r.round}/${r.proxy}`, r)
}
const pairsOf = (m) => {
  const rounds = [...new Set([...m.keys()].map((x) => x.split('/')[0]))]
  return rounds.map((n) => [n, m.get(`${n}/${a}`), m.get(`${n}/${b}`)]).filter(([, x, y]) => x && y)
}

if (perRound) {
  console.log(`| cell | round | ${a} / ${b}: req per CPU-s | req/s | p99 ms ${a} · ${b} | other CPU % during ${a} · ${b} |`)
  console.log('|---|---:|---:|---:|---:|---:|')
  for (const [k, m] of cells) {
    for (const [n, x, y] of pairsOf(m)) {
      console.log(`| ${k} | ${n} | ${fmt(x.req_per_cpu_s / y.req_per_cpu_s)} | ${fmt(x.rps / y.rps)} | ` +
        `${x.lat_ms.p99.toFixed(1)} · ${y.lat_ms.p99.toFixed(1)} | ${other(x).toFixed(1)} · ${other(y).toFixed(1)} |`)
    }
  }
  console.log()
}
console.log(`| cell | ${a} / ${b}: req per CPU-s, median (min–max) | req/s | p99 ms ${a} · ${b} |`)
console.log('|---|---:|---:|---:|')
for (const [k, m] of cells) {
  const pairs = pairsOf(m)
  if (pairs.length === 0) continue
  const cpu = pairs.map(([, x, y]) => x.req_per_cpu_s / y.req_per_cpu_s)
  const rps = pairs.map(([, x, y]) => x.rps / y.rps)
  console.log(`| ${k} | ${fmt(median(cpu))} (${fmt(Math.min(...cpu))}–${fmt(Math.max(...cpu))}) | ${fmt(median(rps))} | ` +
    `${median(pairs.map(([, x]) => x.lat_ms.p99)).toFixed(1)} · ${median(pairs.map(([,, y]) => y.lat_ms.p99)).toFixed(1)} |`)
}
