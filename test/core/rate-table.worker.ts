// Worker thread for test/core/rate-table.test.ts: hammers one shared table and
// reports how many of its hits were accepted.
import { parentPort, workerData } from 'node:worker_threads'
import { RateTable } from '../../core/shm/rate-table.js'

interface Job { buffer: SharedArrayBuffer, sets: number, hits: number, keys: number, algo: 'window' | 'bucket', now: number, start: Int32Array }

const job = workerData as Job
const table = new RateTable(new Int32Array(job.buffer), 0, job.sets)
// all threads start together, so their hits really overlap: [1] counts the threads
// waiting for the start signal in [0]
Atomics.add(job.start, 1, 1)
Atomics.wait(job.start, 0, 0)
let accepted = 0
for (let i = 0; i < job.hits; i++) {
  const k = i % job.keys
  const r = job.algo === 'window'
    ? table.window(k * 2 + 1, k * 7919, job.now, 10_000, 1000, 30_000)
    : table.bucket(k * 2 + 1, k * 7919, job.now, 1000 * 1000, 0.001, 30_000)
  if (r >= 0) accepted++
}
parentPort!.postMessage(accepted)
