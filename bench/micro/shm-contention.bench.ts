// What a per-request write to shared memory costs when another worker writes
// the same cache line, against a plain add to the thread's own stripe: why
// in-flight counts are striped gauges (C_INFLIGHT in core/shm/layout.ts) and
// only the round-robin cursor is one shared atomic. While a case runs, a
// second thread adds to the word at `otherWord` of the same buffer in a loop.
import { Worker } from 'node:worker_threads'
import { type Case, type Result, isMain, runSuite } from './harness.js'

const SAME_LINE = 0 // the word the measured thread adds to
const OWN_LINE = 64 // 256 bytes away: another cache line

/** A thread that adds to `word` until stopped; resolves once it is spinning. */
async function contender (sab: SharedArrayBuffer, word: number): Promise<Worker> {
  const src = `
    const { workerData: { sab, word }, parentPort } = require('node:worker_threads')
    const a = new Int32Array(sab)
    parentPort.postMessage('spinning')
    for (;;) Atomics.add(a, word, 1)`
  const w = new Worker(src, { eval: true, workerData: { sab, word } })
  await new Promise((resolve) => w.once('message', resolve))
  return w
}

async function withContender (name: string, word: number, cases: (i32: Int32Array) => Record<string, Case>): Promise<Result[]> {
  const sab = new SharedArrayBuffer(1024)
  const w = await contender(sab, word)
  try {
    return await runSuite(name, cases(new Int32Array(sab)))
  } finally {
    await w.terminate()
  }
}

export async function run (): Promise<Result[]> {
  const f64 = new Float64Array(new SharedArrayBuffer(1024))
  return [
    ...await withContender('shm contention (another thread adds to the same line)', SAME_LINE, (i32) => ({
      'Atomics.add on the shared word': () => { Atomics.add(i32, SAME_LINE, 1) },
    })),
    ...await withContender('shm contention (another thread adds to its own line)', SAME_LINE, (i32) => ({
      'Atomics.add on an own line': () => { Atomics.add(i32, OWN_LINE, 1) },
      'plain += on an own Float64 stripe (the gauges)': () => { f64[OWN_LINE / 2]! += 1 },
    })),
  ]
}

if (isMain(import.meta.url)) await run()
