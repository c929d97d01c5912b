// The generation service in the control plane: the Ollama- and OpenAI-compatible HTTP API
// (plain node:http) on a unix socket, which the data plane reaches as an
// ordinary upstream, and optionally on its own TCP listener. Inference runs in
// a supervised child process (local/supervisor.ts); this process only validates,
// schedules and writes replies, so a crashing model never takes it down.

import { createServer, type Server } from 'node:http'
import { dirname, join } from 'node:path'
import { isoNow } from '../clock.js'
import { formatHostPort } from '../config/host-port.js'
import type { Logger } from '../log.js'
import type { GenerationConf } from './config.js'
import { ModelCatalog } from './models/catalog.js'
import type { GenEnv } from './dispatch/generation.js'
import { Budget } from './budget/budget.js'
import { ModelUsage } from './dispatch/model-usage.js'
import type { BudgetCluster } from './budget/lease.js'
import { createHandler } from './http/routes.js'
import { Scheduler } from './local/scheduler.js'
import { RemoteBroker } from './remote/broker.js'
import { RemoteRegistry } from './remote/registry.js'
import type { ModelSlots } from '../shm/model-inflight.js'
import type { BudgetRecords } from '../shm/budget-records.js'
import { OwnedSocket } from './http/socket.js'
import { emptyRequests, type GenStats } from './stats.js'
import { Supervisor } from './local/supervisor.js'
import { ensureTinyModel } from './models/tiny-model.js'
import { genView } from './view.js'

export type { GenStats } from './stats.js'

export interface GenerationService {
  /** The unix socket the API listens on (the data plane's upstream). */
  socketPath: string
  /** The extra TCP listener, when `listen` is set (port resolved when it was 0). */
  tcpAddress: { host: string, port: number } | null
  /** Pid of the current runner process (0 while it restarts). */
  runnerPid (): number
  /** Resolves when a runner is ready to take jobs (requests sent before simply wait in the queue). */
  ready (): Promise<void>
  close (): Promise<void>
  stats (): GenStats
  /** Admits, routes and accounts the remote model requests the data-plane workers relay ([generation] relay = "worker"). */
  broker: RemoteBroker
}

function listenTcp (server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => { server.off('error', reject); resolve() })
  })
}

/** What the generation service shares with the data-plane workers (core/main.ts makes it from the shared memory). */
export interface SharedGen { readonly slots: ModelSlots, readonly budgets: BudgetRecords }

/**
 * Starts the API listeners and the runner; callers (core/main.ts) start it only when [generation] is enabled.
 * `cluster`: in cluster mode, the keys' budgets are leased from the other nodes (budget/lease.ts).
 * `shared`: the shared memory's in-flight counts per model server and model, and the consumers' budgets, which
 * the workers' own admissions count in too (null: counted here, and the workers ask for every request).
 */
export async function startGeneration (conf: GenerationConf, log: Logger, cluster: BudgetCluster | null = null, shared: SharedGen | null = null): Promise<GenerationService> {
  const slots = shared?.slots ?? null
  const glog = log.child({ component: 'generation' })
  const builtin = conf.builtinModel ? await ensureTinyModel(join(dirname(conf.socket), 'lb-tiny.gguf')) : null
  const catalog = new ModelCatalog(conf, builtin, glog)
  let scheduler: Scheduler | null = null
  let readyWaiters: Array<() => void> = []
  const supervisor = new Supervisor(
    new URL('./local/runner/runner.js', import.meta.url),
    { workers: conf.workers, threads: conf.threads, parallel: conf.parallel, contexts: conf.contexts, streamBatchMs: conf.streamBatchMs, maxPromptTokens: conf.maxPromptTokens },
    conf.restartDelayMs, conf.restartDelayMaxMs, glog,
    {
      ready: () => {
        scheduler?.onRunnerReady()
        for (const w of readyWaiters) w()
        readyWaiters = []
      },
      messages: (msgs) => scheduler?.onMessages(msgs, isoNow()),
      exit: (reason) => scheduler?.onRunnerExit(reason),
    }
  )
  scheduler = new Scheduler(conf.parallel * conf.contexts, conf.maxQueue, conf.maxLoaded, supervisor)
  const remote = new RemoteRegistry(conf, glog, slots)
  remote.localModels = () => catalog.known()
  const env: GenEnv = { conf, catalog, scheduler, remote, log: glog, requests: emptyRequests(), budget: new Budget(conf.auth, conf.keys, shared?.budgets), usage: new ModelUsage() }
  const leases = cluster === null ? null : env.budget.leases(cluster, glog)
  const onSocket = createHandler(env, true)
  const broker = new RemoteBroker(env)
  let socketRequests = 0
  const unix = new OwnedSocket(conf.socket, (req, res) => { socketRequests++; onSocket(req, res) }, glog)
  const servers: Server[] = []
  const stats = (): GenStats => ({
    requests: env.requests,
    tokens: scheduler.tokens,
    promptTokens: scheduler.promptTokens,
    queueDepth: scheduler.queueDepth,
    inFlight: scheduler.inFlight,
    runnerRestarts: supervisor.restarts,
    socketRequests,
    relayAdmissions: broker.admissions,
    consumers: env.budget.usage.byLabel,
    models: env.usage.series,
    view: () => genView(env),
  })
  let tcpAddress: GenerationService['tcpAddress'] = null
  let closed: Promise<void> | null = null

  const close = async (): Promise<void> => {
    leases?.stop()
    unix.stopAccepting()
    remote.close()
    for (const s of servers) s.close()
    scheduler.close('the generation service is shutting down')
    await supervisor.close()
    unix.closeConnections()
    for (const s of servers) s.closeAllConnections()
    // Only our own file: another lb may have taken the path while this one was stopping.
    unix.removeFile()
  }

  const ready = (): Promise<void> => supervisor.ready ? Promise.resolve() : new Promise((resolve) => readyWaiters.push(resolve))
  try {
    await unix.start()
    if (conf.listen !== '') {
      const i = conf.listen.lastIndexOf(':')
      const host = conf.listen.slice(0, i).replace(/^\[|\]$/g, '')
      const tcp = createServer(createHandler(env, false))
      servers.push(tcp)
      await listenTcp(tcp, host, Number(conf.listen.slice(i + 1)))
      const a = tcp.address()
      tcpAddress = typeof a === 'object' && a !== null ? { host, port: a.port } : null
      // the bound port: the kernel's choice when `listen` says port 0
      if (tcpAddress !== null) glog.info('listening', { surface: 'generation', address: formatHostPort(host, tcpAddress.port) })
    }
    supervisor.start()
    remote.start()
    // the local models' names for the views (requests scan again when they miss)
    void catalog.list().then(() => remote.changed(), () => undefined)
    leases?.start()
  } catch (e) {
    await close()
    throw e
  }
  glog.info('generation service listening', { socket: conf.socket, listen: conf.listen })
  return {
    socketPath: conf.socket,
    tcpAddress,
    runnerPid: () => supervisor.pid,
    ready,
    close: () => (closed ??= close()),
    stats,
    broker,
  }
}
