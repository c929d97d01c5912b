// Per-request cost of a generation budget's admission (core/gen/budget/ledger.ts):
// admit (with a reservation) and end (charging the tokens used), for a key
// counted on its node alone and for one admitted on its cluster lease (the
// path with no Redis round trip), on records in shared memory under their
// lock (core/shm/budget-records.ts). Runs once per generation request, in the
// control plane or the worker that relays it, so well under a microsecond is plenty.
// LB_BENCH_QUICK=1 runs each case for about 0.1 s (a check that it runs, not a measurement).
import Benchmark from 'benchmark'
import { Ledger, type Refusal, type Ticket } from '../../core/gen/budget/ledger.js'
import { type Result, isMain, runSuite } from './harness.js'

export async function run (): Promise<Result[]> {
  if (process.env.LB_BENCH_QUICK === '1') Object.assign(Benchmark.options, { maxTime: 0.1, minSamples: 2, initCount: 1 })
  const limits = { rpm: 1e9, tpm: 1e15, tpd: 1e15, maxInFlight: 0 }
  const alone = new Ledger(['k'])
  const leased = new Ledger(['k'])
  // a lease as large as the limits: every admission is on the lease
  leased.admit('k', limits, 0, true)
  leased.setLease(leased.leaseAsk('k', limits, true, 1)!, limits, [1e9, 0, 1e15, 0, 1e15, 0])
  const admitEnd = (l: Ledger, onLease: boolean) => (): void => {
    const t: Ticket | Refusal = l.admit('k', limits, 30, onLease)
    if ('status' in t) throw new Error(t.message)
    t.end(10)
  }
  return runSuite('generation budget', {
    'admit + end, a key on its node alone': admitEnd(alone, false),
    'admit + end, a key on its cluster lease': admitEnd(leased, true),
  })
}

if (isMain(import.meta.url)) await run()
