// Thin wrapper over benchmark.js for the micro-benchmarks: one suite per file,
// results printed as ns per operation (the unit the goals are stated in) and
// returned for run.ts. A file runs alone with `node dist/bench/micro/x.bench.js`.
import Benchmark from 'benchmark'
import { pathToFileURL } from 'node:url'

export interface Result {
  readonly suite: string
  readonly name: string
  readonly nsPerOp: number
  /** relative margin of error, percent */
  readonly rme: number
  readonly samples: number
}

export type Case = (() => void) | { defer: true, fn: (done: () => void) => void }

export function runSuite (suite: string, cases: Record<string, Case>): Promise<Result[]> {
  return new Promise((resolve) => {
    const s = new Benchmark.Suite(suite)
    for (const [name, c] of Object.entries(cases)) {
      if (typeof c === 'function') s.add(name, c)
      else s.add(name, (d: { resolve: () => void }) => c.fn(() => d.resolve()), { defer: true })
    }
    const out: Result[] = []
    s.on('cycle', (e: Benchmark.Event) => {
      const b = e.target as unknown as Benchmark
      const r = { suite, name: String(b.name), nsPerOp: b.stats.mean * 1e9, rme: b.stats.rme, samples: b.stats.sample.length }
      out.push(r)
      console.log(`${suite} › ${r.name}: ${format(r.nsPerOp)} ±${r.rme.toFixed(1)}% (${r.samples} samples)`)
    })
    s.on('complete', () => resolve(out))
    s.run({ async: true })
  })
}

export function format (ns: number): string {
  if (ns < 1000) return `${ns.toFixed(0)} ns/op`
  if (ns < 1e6) return `${(ns / 1000).toFixed(2)} µs/op`
  return `${(ns / 1e6).toFixed(2)} ms/op`
}

/** True when the module at `url` is the process's entry point. */
export function isMain (url: string): boolean {
  return process.argv[1] !== undefined && url === pathToFileURL(process.argv[1]).href
}
