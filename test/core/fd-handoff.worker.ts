// Worker thread for test/core/fd-handoff.test.ts: takes the descriptors handed to
// worker number `self` and answers each connection with "served by <self>".
import { closeSync, writeSync } from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'
import { attachShm } from '../../core/shm/buffer.js'
import { receiveFds } from '../../core/shm/fd-handoff.js'

const { buffer, self, workers } = workerData as { buffer: SharedArrayBuffer, self: number, workers: number }
const shm = attachShm(buffer, workers)
receiveFds(shm.i32, self, (_ep, fd) => {
  writeSync(fd, `served by ${self}`)
  closeSync(fd)
})
parentPort!.postMessage('ready')
parentPort!.on('message', () => process.exit(0)) // keeps the thread alive until told
