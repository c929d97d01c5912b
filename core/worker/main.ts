// Data-plane worker entry: attaches shared memory, builds the data plane from
// the config snapshot, listens on every HTTP entry point (SO_REUSEPORT, so all
// workers share the addresses) and swaps generations when the control plane
// sends a new config.
import { parentPort, workerData } from 'node:worker_threads'
import { startClock } from '../clock.js'
import { createLogger } from '../log.js'
import { isLbError } from '../errors.js'
import { type FromWorker, type ToWorker, type WorkerData } from '../protocol.js'
import { attachShm, G_WRITING, stripeBase } from '../shm/layout.js'
import { Stripe } from '../shm/counters.js'
import { AccessLog } from './access-log.js'
import { DataPlane, type PoolCache } from './dataplane.js'
import { type Listener, listenHttp, loadUws } from './http.js'

const data = workerData as WorkerData
const port = parentPort!
const post = (m: FromWorker): void => port.postMessage(m)

const DRAIN_POLL_MS = 50

async function main (): Promise<void> {
  const uws = loadUws()
  startClock()
  const shm = attachShm(data.shm, data.workers)
  const stripe = new Stripe(shm, data.index)
  const log = createLogger(data.config.global.logLevel, { worker: data.index })
  const accessLog = new AccessLog(data.config.global.accessLog)
  const pools: PoolCache = new Map()
  let dp = new DataPlane(data.config, data.slots, shm, stripe, log, accessLog, pools)
  let generation = data.generation
  const handler = (ctx: Parameters<DataPlane['handle']>[0], client: Parameters<DataPlane['handle']>[1]): void => dp.handle(ctx, client)

  let listeners: Listener[] = []
  const listen = async (): Promise<void> => {
    for (const ep of data.config.entrypoints) {
      const l = await listenHttp(uws, ep.host, ep.port, ep.name, 'http', handler)
      if (l === null) throw new Error(`cannot listen on ${ep.host}:${ep.port} (entry point ${ep.name})`)
      listeners.push(l)
    }
  }
  const unlisten = (): void => {
    for (const l of listeners) l.close()
    listeners = []
  }
  await listen()

  port.on('message', (msg: ToWorker) => {
    switch (msg.type) {
      case 'config':
        try {
          dp = new DataPlane(msg.config, msg.slots, shm, stripe, log, accessLog, pools)
          generation = msg.generation
          post({ type: 'applied', index: data.index, generation })
        } catch (err) {
          post({ type: 'rejected', index: data.index, generation: msg.generation, message: (err as Error).message })
        }
        break
      case 'accept':
        if (!msg.on) unlisten()
        else if (listeners.length === 0) listen().catch((err: Error) => log.error('cannot listen again', { error: err.message }))
        break
      case 'drain': {
        unlisten()
        const writing = stripeBase(data.index) + G_WRITING
        const poll = setInterval(() => {
          if (shm.f64[writing]! > 0) return
          clearInterval(poll)
          accessLog.close()
          process.exit(0)
        }, DRAIN_POLL_MS)
        break
      }
      default: {
        const never: never = msg
        log.error('unknown message', { msg: never })
      }
    }
  })
  post({ type: 'ready', index: data.index })
}

main().catch((err: unknown) => {
  post({ type: 'fatal', index: data.index, message: isLbError(err) ? err.message : (err as Error).stack ?? String(err) })
  process.exit(3)
})
