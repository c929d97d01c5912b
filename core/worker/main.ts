// Data-plane worker entry: attaches shared memory, builds the data plane from
// the config snapshot, listens on its entry points (listeners.ts: uWS apps on
// shared addresses in every worker; tcp and mTLS listeners in worker 0) and
// swaps generations when the control plane sends a new config.
import { parentPort, workerData } from 'node:worker_threads'
import { startClock } from '../clock.js'
import { createLogger } from '../log.js'
import { isLbError } from '../errors.js'
import { type FromWorker, type ToWorker, type WorkerData } from '../protocol.js'
import { G_WRITING, stripeBase } from '../shm/layout.js'
import { attachShm } from '../shm/buffer.js'
import { Stripe } from '../shm/counters.js'
import { countServerHandshakesIn } from '../upstream/tls-handshakes.js'
import { BudgetRecords } from '../shm/budget-records.js'
import { AccessLog } from './access-log.js'
import { DataPlane } from './dataplane.js'
import type { PoolCache } from './service-runtime.js'
import { loadPluginModules } from '../../plugins/index.js'
import { type PluginHost, retireMiddlewares } from './request/middleware.js'
import type { Revocation } from '../shm/revocations.js'
import { closeAllApps, setClientTimeouts } from './transport/uws/apps.js'
import { loadUws } from './transport/uws/native.js'
import { EntryPoints } from './listeners.js'
import { setNodeHeadLimit, setNodeTimeouts } from './transport/node/engine.js'
import { shareTicketKeys } from './tls/tls-contexts.js'
import { setAcmeTokens } from './tls/acme-challenge.js'
import { cutExchanges } from './proxy/proxy.js'
import { openSessions } from './proxy/tcp-proxy.js'
import { SpanExporter } from './trace/exporter.js'
import { cutRelays } from '../gen/edge/edge.js'
import { EdgeLink } from '../gen/edge/link.js'

const data = workerData as WorkerData
const port = parentPort!
const post = (m: FromWorker): void => port.postMessage(m)

const DRAIN_POLL_MS = 50
/** SIGTERM: spans still queued get this long to reach the collector before the thread exits, ms */
const SPAN_FLUSH_MS = 2_000
/** a shared revocation not answered by the control plane within this is given up on (its own bounds are shorter), ms */
const REVOKE_WAIT_MS = 5_000

// However this thread ends, close uWS first (see closeAllApps); an uncaught
// error ends the thread cleanly and the supervisor starts a fresh one.
process.on('exit', closeAllApps)
process.on('uncaughtException', (err) => {
  post({ type: 'fatal', index: data.index, message: err.stack ?? err.message })
  process.exit(70)
})

async function main (): Promise<void> {
  const uws = loadUws()
  startClock()
  const shm = attachShm(data.shm, data.workers)
  const stripe = new Stripe(shm, data.index)
  countServerHandshakesIn(stripe)
  const log = createLogger(data.config.global.logLevel, { worker: data.index })
  const accessLog = new AccessLog(data.config.global.accessLog)
  const pools: PoolCache = new Map()
  // third-party plugin modules the config names are imported before a generation is built from it
  await loadPluginModules(data.config.middlewares.map((m) => m.type), data.config.baseDir, data.config.global.pluginsDir)
  /** revocations shared with the control plane (PluginEnv.shareRevocation), by seq, until it answers */
  const revoking = new Map<number, () => void>()
  let revokeSeq = 0
  const shareRevocation = (revocation: Revocation): Promise<void> => new Promise((resolve) => {
    const seq = ++revokeSeq
    const timer = setTimeout(() => { revoking.delete(seq); resolve() }, REVOKE_WAIT_MS)
    revoking.set(seq, () => { clearTimeout(timer); revoking.delete(seq); resolve() })
    post({ type: 'revoke', index: data.index, seq, revocation })
  })
  /** middleware states (PluginEnv.setStatus) go to the control plane, tagged with the generation that made the instance */
  const hostOf = (generation: number): PluginHost => ({
    status: (middleware, status, message) => post({ type: 'status', index: data.index, generation, middleware, status, message }),
    shareRevocation,
  })
  // one span exporter per worker, kept across generations as the access log is ([tracing], core/worker/trace/)
  const spans = new SpanExporter(stripe, log)
  spans.configure(data.config.tracing)
  // remote model requests relayed in this thread ([generation] relay = "worker"): its line to the control plane
  const edge = new EdgeLink((msg) => post({ type: 'gen', index: data.index, msg }), shm.i32, BudgetRecords.of(shm))
  let dp = new DataPlane(data.config, data.slots, shm, stripe, log, accessLog, pools, hostOf(data.generation), spans, edge)
  let applying: Promise<void> = Promise.resolve()
  let generation = data.generation
  const handler = (ctx: Parameters<DataPlane['handle']>[0], client: Parameters<DataPlane['handle']>[1]): void => dp.handle(ctx, client)

  /** timeouts.header and client_keep_alive, for every uWS app and node engine server of this thread (a reload changes them for new timers) */
  const clientTimeouts = (t: typeof data.config.timeouts): void => {
    setClientTimeouts(t.headerMs / 1000, t.clientKeepAliveMs / 1000)
    setNodeTimeouts(t.headerMs, t.clientKeepAliveMs)
  }
  clientTimeouts(data.config.timeouts)
  setNodeHeadLimit(data.config.limits.maxHeaderBytes) // fixed at start, as uWS's (loadUws)
  shareTicketKeys(data.ticketKeys)
  // http/https (uWS, WebSocket), mTLS and tcp listeners (core/worker/listeners.ts)
  const entrypoints = new EntryPoints(uws, data, shm, handler, () => dp, log)
  setAcmeTokens(data.acme.tokens)
  await entrypoints.start()

  port.on('message', (msg: ToWorker) => {
    switch (msg.type) {
      case 'config':
        // generations apply in arrival order; importing plugin modules a generation names is the only wait
        applying = applying
          .then(() => loadPluginModules(msg.config.middlewares.map((m) => m.type), msg.config.baseDir, msg.config.global.pluginsDir))
          .then(() => {
            const retired = dp
            spans.configure(msg.config.tracing)
            dp = new DataPlane(msg.config, msg.slots, shm, stripe, log, accessLog, pools, hostOf(msg.generation), spans, edge)
            clientTimeouts(msg.config.timeouts)
            // every generation makes its middleware instances anew: the replaced ones stop what they started
            retireMiddlewares(retired.middlewares, log)
            generation = msg.generation
            post({ type: 'applied', index: data.index, generation })
            // every generation (SIGHUP included) re-reads the TLS files; changed certificates are served from now on
            void entrypoints.refreshTls()
          })
          .catch((err: unknown) => {
            post({ type: 'rejected', index: data.index, generation: msg.generation, message: (err as Error).message })
          })
        break
      case 'acme':
        // what the control plane's ACME resolvers obtained (served by SNI) and the http-01 answers due
        setAcmeTokens(msg.state.tokens)
        // certificate files uWS cannot use are logged there (LB_ERR_TLS) and the entry point keeps what it served
        void entrypoints.setAcme(msg.state.certs, msg.state.alpn).then(() => post({ type: 'acme-applied', index: data.index, seq: msg.seq }))
        break
      case 'revoked':
        revoking.get(msg.seq)?.()
        break
      case 'gen-listing':
        edge.listing(msg.listing)
        break
      case 'gen-answer':
        edge.answer(msg.id, msg.answer)
        break
      case 'drain': {
        entrypoints.unlisten()
        const writing = stripeBase(data.index) + G_WRITING
        let exiting = false
        const exit = (): void => {
          clearInterval(poll)
          if (exiting) return
          exiting = true
          retireMiddlewares(dp.middlewares, log)
          accessLog.close()
          // closes uWS first (the 'exit' handler): every client socket still open is closed
          void spans.shutdown(SPAN_FLUSH_MS).finally(() => process.exit(0))
        }
        const poll = setInterval(() => {
          if (shm.f64[writing]! > 0 || entrypoints.busy()) return
          exit()
        }, DRAIN_POLL_MS)
        // At the deadline every request still open is answered (503 + Connection: close, or its
        // connection closed when the head is out) and its upstream connection closed, then the
        // thread exits by itself: never terminate() a thread with uWS requests open (uWS aborts the process).
        setTimeout(() => {
          const count = cutExchanges() + openSessions() + cutRelays()
          for (const pool of pools.values()) pool.close()
          post({ type: 'cut', index: data.index, count })
          setTimeout(exit, DRAIN_POLL_MS) // the answers are written; give the loop a turn to flush them
        }, msg.timeoutMs).unref()
        break
      }
      default: {
        const never: never = msg
        log.error('unknown message', { msg: never })
      }
    }
  })
  post({ type: 'ready', index: data.index, ports: entrypoints.ports() })
}

main().catch((err: unknown) => {
  post({ type: 'fatal', index: data.index, message: isLbError(err) ? err.message : (err as Error).stack ?? String(err) })
  process.exit(3)
})
