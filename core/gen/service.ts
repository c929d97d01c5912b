// The generation service in the control plane: the Ollama-compatible HTTP API
// (plain node:http) on a unix socket, which the data plane reaches as an
// ordinary upstream, and optionally on its own TCP listener. Inference runs in
// a supervised child process (supervisor.ts); this process only validates,
// schedules and writes replies, so a crashing model never takes it down.

import { createServer, type Server } from 'node:http'
import { connect } from 'node:net'
import { mkdir, unlink } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import type { Logger } from '../log.js'
import type { GenerationConf } from './config.js'
import { ModelCatalog } from './models.js'
import { nowIso } from './reply.js'
import { createHandler, type RouteEnv } from './routes.js'
import { Scheduler } from './scheduler.js'
import { emptyRequests, type GenStats } from './stats.js'
import { Supervisor } from './supervisor.js'
import { ensureTinyModel } from './tiny-model.js'

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
}

/** Removes a stale socket file, refusing if something still answers on it. */
async function claimSocket (path: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true })
  const alive = await new Promise<boolean>((resolve) => {
    const s = connect(path)
    s.once('connect', () => { s.destroy(); resolve(true) })
    s.once('error', () => resolve(false))
  })
  if (alive) throw new Error(`generation socket ${path} is in use by another process`)
  await unlink(path).catch(() => undefined)
}

function listen (server: Server, target: string | { host: string, port: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    const done = (): void => { server.off('error', reject); resolve() }
    if (typeof target === 'string') server.listen(target, done)
    else server.listen(target.port, target.host, done)
  })
}

/** Starts the API listeners and the runner; callers (core/main.ts) start it only when [generation] is enabled. */
export async function startGeneration (conf: GenerationConf, log: Logger): Promise<GenerationService> {
  const glog = log.child({ component: 'generation' })
  const builtin = conf.builtinModel ? await ensureTinyModel(join(dirname(conf.socket), 'lb-tiny.gguf')) : null
  const catalog = new ModelCatalog(conf, builtin, glog)
  let scheduler: Scheduler | null = null
  let readyWaiters: Array<() => void> = []
  const supervisor = new Supervisor(
    new URL('./runner.js', import.meta.url),
    { workers: conf.workers, threads: conf.threads, parallel: conf.parallel, contexts: conf.contexts, streamBatchMs: conf.streamBatchMs, maxPromptTokens: conf.maxPromptTokens },
    conf.restartDelayMs, conf.restartDelayMaxMs, glog,
    {
      ready: () => {
        scheduler?.onRunnerReady()
        for (const w of readyWaiters) w()
        readyWaiters = []
      },
      messages: (msgs) => scheduler?.onMessages(msgs, nowIso()),
      exit: (reason) => scheduler?.onRunnerExit(reason),
    },
  )
  scheduler = new Scheduler(conf.parallel * conf.contexts, conf.maxQueue, conf.maxLoaded, supervisor)
  const env: RouteEnv = { conf, catalog, scheduler, log: glog, requests: emptyRequests() }
  const handler = createHandler(env)
  const servers: Server[] = []
  const stats = (): GenStats => ({
    requests: env.requests,
    tokens: scheduler.tokens,
    promptTokens: scheduler.promptTokens,
    queueDepth: scheduler.queueDepth,
    inFlight: scheduler.inFlight,
    runnerRestarts: supervisor.restarts,
  })
  let tcpAddress: GenerationService['tcpAddress'] = null
  let closed: Promise<void> | null = null

  const close = async (): Promise<void> => {
    for (const s of servers) s.close()
    scheduler.close('the generation service is shutting down')
    await supervisor.close()
    for (const s of servers) s.closeAllConnections()
    await unlink(conf.socket).catch(() => undefined)
  }

  const ready = (): Promise<void> => supervisor.ready ? Promise.resolve() : new Promise((resolve) => readyWaiters.push(resolve))
  try {
    await claimSocket(conf.socket)
    const unix = createServer(handler)
    servers.push(unix)
    await listen(unix, conf.socket)
    if (conf.listen !== '') {
      const i = conf.listen.lastIndexOf(':')
      const host = conf.listen.slice(0, i).replace(/^\[|\]$/g, '')
      const tcp = createServer(handler)
      servers.push(tcp)
      await listen(tcp, { host, port: Number(conf.listen.slice(i + 1)) })
      const a = tcp.address()
      tcpAddress = typeof a === 'object' && a !== null ? { host, port: a.port } : null
    }
    supervisor.start()
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
  }
}
