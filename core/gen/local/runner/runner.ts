// Entry of the runner child process (forked by local/supervisor.ts). It owns the
// piscina pool whose worker threads run node-llama-cpp (task.ts) and relays
// between the API process (IPC) and the tasks (one MessagePort per job).
//
// Batching needs every job of a model in the worker that holds that model, so
// the pool's balancer pins a model to a worker on first use (the least busy
// one) and routes its later jobs and its unload there. A worker runs many jobs
// at once (concurrentTasksPerWorker); the API process bounds how many.
//
// Messages to the API process are queued and flushed once per event-loop turn
// as one array: under load one IPC write carries the pieces of every sequence
// of a batch, instead of one write per token.

import { MessageChannel, type MessagePort } from 'node:worker_threads'
import { Piscina } from 'piscina'
import type { FromRunner, FromTask, JobSpec, RunnerConf, ToRunner, ToTask, WorkerResult, WorkerTask } from '../protocol.js'

const TASK_FILE = new URL('./task.js', import.meta.url).href
const SHUTDOWN_MS = 2_000

let pool: Piscina | null = null
let conf: RunnerConf | null = null
/** Open jobs: the runner's end of each job's port. */
const ports = new Map<number, MessagePort>()

let outbox: FromRunner[] = []
let flushScheduled = false

/** Queues a message for the API process; one IPC write per event-loop turn carries them all. */
function post (m: FromRunner): void {
  outbox.push(m)
  if (!flushScheduled) {
    flushScheduled = true
    setImmediate(flush)
  }
}

function flush (): void {
  flushScheduled = false
  if (outbox.length === 0 || process.send === undefined) return
  const batch = outbox
  outbox = []
  process.send(batch)
}

/** Pins each model (by file) to one worker thread, so its jobs share its contexts. */
type Balancer = NonNullable<ConstructorParameters<typeof Piscina>[0]>['loadBalancer'] & {}

function affinityBalancer (): Balancer {
  const pins = new Map<string, number>()
  return (task, workers) => {
    const opts = (task as unknown as Record<symbol, { model?: string } | null>)[Piscina.queueOptionsSymbol]
    const model = opts?.model
    const alive = workers.filter((w) => !w.terminating && !w.destroyed)
    if (alive.length === 0) return null
    if (model !== undefined) {
      const pinned = alive.find((w) => w.id === pins.get(model))
      if (pinned !== undefined) return pinned
    }
    let best = alive[0]!
    for (const w of alive) if (w.currentUsage < best.currentUsage) best = w
    if (model !== undefined) pins.set(model, best.id)
    return best
  }
}

function finish (id: number, m: FromRunner): void {
  const port = ports.get(id)
  if (port === undefined) return
  ports.delete(id)
  port.close()
  post(m)
}

function run (id: number, job: JobSpec, c: RunnerConf): void {
  const { port1, port2 } = new MessageChannel()
  ports.set(id, port1)
  port1.on('message', (m: FromTask) => {
    switch (m.type) {
      case 'pieces': post(m); break
      case 'done': case 'failed': finish(id, m); break
      default: { const never: never = m; throw new Error(`unknown task message ${JSON.stringify(never)}`) }
    }
  })
  const task: WorkerTask = { type: 'job', id, job, conf: c, port: port2 }
  // The symbol-keyed queue options are read by the balancer and not cloned to the worker.
  Object.assign(task, { [Piscina.queueOptionsSymbol]: { model: job.modelPath } })
  pool!.run(task, { transferList: [port2] }).then(
    // The end normally arrives on the port; this only covers a task that returned without posting it.
    (r: WorkerResult) => setImmediate(() => { if (r.type === 'done' || r.type === 'failed') finish(id, r) }),
    (err: Error) => finish(id, { type: 'failed', id, status: 500, message: `generation failed: ${err.message}` })
  )
}

/**
 * Stops running jobs, then exits. The pool is not destroyed first: terminating a
 * worker thread while llama.cpp objects are alive in it aborts inside the
 * native addon; exiting the process releases everything at once.
 */
async function shutdown (): Promise<void> {
  for (const port of ports.values()) port.postMessage({ type: 'cancel' } satisfies ToTask)
  const end = Date.now() + SHUTDOWN_MS
  while (ports.size > 0 && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 10))
  flush()
  process.exit(0)
}

/** Initialises every worker (llama.cpp loads once per thread) before reporting ready. */
async function warm (p: Piscina, workers: number): Promise<void> {
  const tasks: Array<Promise<unknown>> = []
  for (let i = 0; i < workers; i++) tasks.push(p.run({ type: 'warm' } satisfies WorkerTask))
  await Promise.all(tasks)
}

process.on('message', (m: ToRunner) => {
  switch (m.type) {
    case 'init':
      if (pool !== null) break
      conf = m.conf
      pool = new Piscina({
        filename: TASK_FILE,
        minThreads: conf.workers,
        maxThreads: conf.workers,
        idleTimeout: Infinity,
        // node-llama-cpp is asynchronous; the 'sync' Atomics loop would stall it while a worker idles.
        atomics: 'disabled',
        concurrentTasksPerWorker: 4096,
        maxQueue: Infinity,
        loadBalancer: affinityBalancer(),
      })
      warm(pool, conf.workers).then(
        () => post({ type: 'ready', pid: process.pid }),
        (err: Error) => { process.stderr.write(`generation runner: workers failed to start: ${err.message}\n`); process.exit(1) }
      )
      break
    case 'run':
      if (pool === null || conf === null) {
        post({ type: 'failed', id: m.id, status: 500, message: 'generation runner is not initialised' })
        break
      }
      run(m.id, m.job, conf)
      break
    case 'cancel':
      ports.get(m.id)?.postMessage({ type: 'cancel' } satisfies ToTask)
      break
    case 'unload':
      if (pool !== null) {
        const task: WorkerTask = { type: 'unload', modelPath: m.modelPath }
        Object.assign(task, { [Piscina.queueOptionsSymbol]: { model: m.modelPath } })
        pool.run(task).catch(() => undefined)
      }
      break
    case 'shutdown':
      void shutdown()
      break
    default: { const never: never = m; throw new Error(`unknown message ${JSON.stringify(never)}`) }
  }
})

// The API process is gone (it crashed or was killed): do not linger as an orphan.
process.on('disconnect', () => { void shutdown() })
