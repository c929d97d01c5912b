// Runs every micro-benchmark in this folder (files named *.bench.js once
// compiled), one after another in this process, and prints a summary table.
// `npm run bench`; one file alone: `node dist/bench/micro/<name>.bench.js`.
import { readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { type Result, format } from './harness.js'

const dir = fileURLToPath(new URL('.', import.meta.url))
const only = process.argv.slice(2)
const all: Result[] = []
for (const f of readdirSync(dir).filter((x) => x.endsWith('.bench.js')).sort()) {
  if (only.length > 0 && !only.some((o) => f.startsWith(o))) continue
  const mod = await import(new URL(f, import.meta.url).href) as { run?: () => Promise<Result[]> }
  if (typeof mod.run === 'function') all.push(...await mod.run())
}
console.log('\n| suite | case | time per op | ± |\n|---|---|---|---|')
for (const r of all) console.log(`| ${r.suite} | ${r.name} | ${format(r.nsPerOp).replace('/op', '')} | ${r.rme.toFixed(1)}% |`)
