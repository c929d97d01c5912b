// The thread behind core/auth/bcrypt-thread.ts: compares one password with
// one bcrypt hash per message, in arrival order. A hash bcryptjs cannot use
// comes back as an error, never a crash of the thread.
import { parentPort } from 'node:worker_threads'
import bcrypt from 'bcryptjs'

parentPort!.on('message', (m: { id: number, password: string, hash: string }) => {
  try {
    parentPort!.postMessage({ id: m.id, ok: bcrypt.compareSync(m.password, m.hash) })
  } catch (err) {
    parentPort!.postMessage({ id: m.id, error: (err as Error).message })
  }
})
