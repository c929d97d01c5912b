// bcrypt off the event loop. A check costs tens of milliseconds of CPU by
// design (about 75 ms at cost 10 here), and bcryptjs runs it in one piece,
// so on a data-plane worker's loop a few wrong passwords a second stalled
// every connection of that worker. Each thread that checks passwords (a
// data-plane worker, the control plane for the admin API) gets one helper
// thread at its first check; checks run there one at a time, in order.
//
// At most MAX_WAITING checks wait per thread (about 5 s of work at cost 10):
// one more is refused with LB_ERR_AUTH_BUSY (503) rather than queued, so a
// flood cannot grow the queue, or the wait of the next real user, without bound.
import { Worker } from 'node:worker_threads'
import { lbError } from '../errors.js'

export const MAX_WAITING = 64

interface Waiter { resolve: (ok: boolean) => void, reject: (err: Error) => void }

let helper: Worker | null = null
const waiting = new Map<number, Waiter>()
let nextId = 0

function start (): Worker {
  const w = new Worker(new URL('./bcrypt-worker.js', import.meta.url))
  w.on('message', (m: { id: number, ok?: boolean, error?: string }) => {
    const waiter = waiting.get(m.id)
    waiting.delete(m.id)
    if (waiting.size === 0) w.unref()
    if (m.error !== undefined) waiter?.reject(new Error(m.error))
    else waiter?.resolve(m.ok === true)
  })
  // a helper that died fails what it held; the next check starts another
  const fail = (err: Error): void => {
    if (helper === w) helper = null
    for (const waiter of waiting.values()) waiter.reject(err)
    waiting.clear()
  }
  w.on('error', fail)
  w.on('exit', (code) => fail(new Error(`the bcrypt thread exited (${code})`)))
  return w
}

/** Whether `password` matches the bcrypt `hash`; rejects with LB_ERR_AUTH_BUSY when MAX_WAITING checks wait already. */
export function bcryptCompare (password: string, hash: string): Promise<boolean> {
  if (waiting.size >= MAX_WAITING) return Promise.reject(lbError('LB_ERR_AUTH_BUSY', { waiting: MAX_WAITING }))
  helper ??= start()
  // it keeps the process alive while a check waits, never after (unref after the 'message' listener: adding one refs)
  if (waiting.size === 0) helper.ref()
  const id = nextId++
  const done = new Promise<boolean>((resolve, reject) => { waiting.set(id, { resolve, reject }) })
  helper.postMessage({ id, password, hash })
  return done
}
