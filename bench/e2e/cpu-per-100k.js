// Reads a harness results.jsonl and prints, per scenario and target, the median
// over rounds of CPU-seconds per 100k requests (proxy process tree), p50/p99 and
// req/s, with the ratio to nginx-1w measured in the same round.
import { readFileSync } from 'node:fs'

const runs = readFileSync(process.argv[2], 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((r) => r.kind === 'measure' && r.ok)
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length === 0 ? NaN : s[Math.floor((s.length - 1) / 2)] }
const scenarios = [...new Set(runs.map((r) => `${r.body} c${r.conns}`))]
for (const sc of scenarios) {
  const rs = runs.filter((r) => `${r.body} c${r.conns}` === sc)
  console.log(`\n### ${sc}: CPU-seconds per 100k requests (median over rounds)\n`)
  console.log('| target | req/s | p50 ms | p99 ms | CPU-s per 100k | × nginx-1w (lower is better) |\n|---|---:|---:|---:|---:|---:|')
  for (const t of [...new Set(rs.map((r) => r.proxy))]) {
    const mine = rs.filter((r) => r.proxy === t)
    const per = (r) => r.proxy_cpu.cpu_s / r.requests * 1e5
    const ratios = mine.map((r) => {
      const ref = rs.find((x) => x.proxy === 'nginx-1w' && x.round === r.round)
      return ref === undefined ? NaN : per(r) / per(ref)
    })
    console.log(`| ${t} | ${Math.round(median(mine.map((r) => r.rps))).toLocaleString('en')} | ${median(mine.map((r) => r.lat_ms.p50)).toFixed(2)} | ${median(mine.map((r) => r.lat_ms.p99)).toFixed(2)} | ${median(mine.map(per)).toFixed(2)} | ${median(ratios).toFixed(2)} |`)
  }
}
