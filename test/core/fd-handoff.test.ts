// The hand-off of accepted connections between threads (core/shm/fd-handoff.ts),
// with real sockets, real descriptors (lb's addon) and real worker threads: a
// connection reaches the worker it is given to; one given to a worker that is
// not there is taken back after CLAIM_MS and served by the next; one no worker
// takes is closed, not leaked.
import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'
import { fdCalls, socketFd } from '../../core/net/fd-peek.js'
import { CLAIM_MS, FdSender } from '../../core/shm/fd-handoff.js'
import { createShm } from '../../core/shm/buffer.js'

const WORKER = new URL('./fd-handoff.worker.js', import.meta.url)

/** A listener whose connections are given (as duplicated descriptors) to `sender`; what each client read, in order. */
async function serve (sender: () => FdSender, clients: number): Promise<string[]> {
  const server = net.createServer({ pauseOnConnect: true }, (sock) => {
    const fd = fdCalls!.dup(socketFd(sock))
    sock.destroy()
    sender().give(3, fd)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as net.AddressInfo).port
  try {
    const out: string[] = []
    for (let i = 0; i < clients; i++) {
      out.push(await new Promise<string>((resolve, reject) => {
        let text = ''
        const c = net.connect(port, '127.0.0.1')
        c.setEncoding('utf8')
        c.on('data', (d: string) => { text += d })
        c.on('end', () => resolve(text))
        c.on('error', reject)
      }))
    }
    return out
  } finally {
    server.close()
  }
}

test('connections handed between threads are served once each, taken back from a worker that is not there, closed when no one takes them', async (t) => {
  assert.ok(fdCalls !== null, 'lb\'s addon native/build/fd-peek.node is built (npm install builds it with cc) and LB_FD_PEEK is not "off"')
  const workers = 3 // 0: this thread (serves nothing: local gives false), 1: a worker thread, 2: never started
  const shm = createShm(workers)
  const one = new Worker(WORKER, { workerData: { buffer: shm.buffer, self: 1, workers } })
  t.after(() => one.postMessage('exit'))
  await new Promise((resolve) => one.once('message', resolve))
  const local: number[] = []
  const sender = new FdSender(shm.i32, 0, workers, (ep) => { local.push(ep); return false })
  t.after(() => sender.close())

  // turns: 0 (declines) → 1 serves; 2 (absent) → taken back after CLAIM_MS → 0 declines → 1 serves; ...
  const t0 = performance.now()
  const got = await serve(() => sender, 2)
  assert.deepEqual(got, ['served by 1', 'served by 1'])
  assert.ok(performance.now() - t0 >= CLAIM_MS, 'the second waited for worker 2 until taken back')
  assert.deepEqual(local, [3, 3], 'this thread was asked (entry point 3) and declined each time')

  // no worker at all takes it: the client sees the connection closed, nothing else
  one.postMessage('exit')
  await new Promise((resolve) => one.once('exit', resolve))
  const alone = new FdSender(shm.i32, 0, workers, () => false)
  t.after(() => alone.close())
  assert.deepEqual(await serve(() => alone, 1), [''])
})
