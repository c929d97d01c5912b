// Control-plane entry (the main thread): loads the config, allocates shared
// memory, starts the data-plane workers and health checks, and handles signals: SIGHUP reloads (an invalid config is rejected
// and the running one stays), SIGTERM/SIGINT drain and exit 0.
import { mkdirSync } from 'node:fs'
import type { Config } from './config/load.js'
import { loadConfigAsync } from './configure.js'
import { ConfigWatch } from './control/config-watch.js'
import { unwritablePaths } from './config/paths.js'
import { lbError } from './errors.js'
import { formatHostPort } from './config/static.js'
import { createLogger, type Logger } from './log.js'
import { type Shm, H_LAST_RELOAD_OK, H_LAST_RELOAD_SEC, H_RELOADS, H_RELOAD_FAILS, CLUSTER_SETS_ON } from './shm/layout.js'
import { createShm } from './shm/buffer.js'
import { Stripe } from './shm/counters.js'
import { countServerHandshakesIn } from './upstream/tls-handshakes.js'
import { ModelSlots } from './shm/model-inflight.js'
import { BudgetRecords } from './shm/budget-records.js'
import { type Management, startManagement } from './admin/index.js'
import { apiStateOverlay } from './admin/config-api/state.js'
import { loadStartConfig } from './admin/config-api/state-start.js'
import { capacityProblems, chooseCapacities } from './config/capacity.js'
import { initFaults } from './control/faults.js'
import { HealthChecker } from './control/health-check.js'
import { SlotRegistry } from './control/slots.js'
import { Supervisor } from './control/supervisor.js'
import { RevocationHub } from './control/revocations.js'
import { withBoundPorts } from './control/bound-ports.js'
import { ServiceNotifier } from './control/sd-notify.js'
import { AcmeManager } from './acme/manager.js'
import { isTerminated, tlsChallengeEntrypoints } from './config/acme.js'
import { listenerSwapWarning } from './net/listener-swap.js'
import { loadUws } from './worker/transport/uws/native.js'
import type { Cluster } from './cluster/index.js'
// the scripts' runner only (node:crypto): ioredis is still loaded with [cluster] alone
import { runScript } from './cluster/scripts.js'
import type { BudgetCluster } from './gen/budget/lease.js'
import { type GenerationService, type SharedGen, startGeneration } from './gen/service.js'
import { budgetRoom } from './gen/budget/conf.js'

/** Static settings a reload cannot change: the running values stay and a warning says so. */
const STATIC_KEYS = ['global', 'entrypoints', 'admin', 'dashboard', 'runtimeSocket', 'generation', 'certificatesResolvers', 'cluster'] as const

export interface Running {
  /** the configuration applied now */
  readonly config: () => Config
  /** dynamic config generation applied now (starts at 1, +1 per apply) */
  readonly generation: () => number
  readonly shm: Shm
  readonly slots: SlotRegistry
  readonly supervisor: Supervisor
  readonly log: Logger
  /** re-reads the config file (SIGHUP); an invalid file is logged and changes nothing */
  reload (): Promise<void>
  /**
   * Applies a new configuration to every worker without a restart (static
   * sections keep their running values). Serialised with reloads. Resolves
   * with the workers' errors (empty = applied everywhere).
   */
  apply (next: Config): Promise<string[]>
  stop (): Promise<void>
}

export async function run (configPath: string): Promise<Running> {
  // the config API's state file is overlaid on the TOML before validation, here and on every reload
  const start = await loadStartConfig(configPath)
  let config = start.config
  const startedAt = Date.now()
  const log = createLogger(config.global.logLevel)
  const notifier = new ServiceNotifier(log)
  if (start.notes.error !== null) log.error('config API state file set aside: it cannot be applied', start.notes.error)
  if (start.notes.removedTemps.length > 0) log.info('removed temp files of interrupted state writes', { files: start.notes.removedTemps })
  loadUws(config.limits.maxHeaderBytes) // fail before starting anything when the native binary cannot load
  const unwritable = unwritablePaths(config)
  if (unwritable.length > 0) throw lbError('LB_ERR_PATH', { problems: unwritable.join('; ') })
  mkdirSync(config.global.stateDir, { recursive: true })
  // the shared memory is sized once, here: reloads and API changes must fit it (capacityProblems in apply)
  const limits = config.limits
  const caps = chooseCapacities(limits, config)
  const shm = createShm(config.global.workers, caps, config.cluster === null ? 0 : CLUSTER_SETS_ON, limits.sessionRevocations, budgetRoom(config.generation))
  // remote model servers' requests in flight, per model, and the consumers' budgets: the workers that admit
  // requests themselves count in them too (core/gen/edge/)
  const sharedGen: SharedGen = { slots: new ModelSlots(shm.i32), budgets: BudgetRecords.of(shm) }
  const fits = (c: Config): string[] => capacityProblems(c, caps, limits, true)
  initFaults(shm, log)
  // the control plane's TLS handshakes with servers (h2 health checks, model-server calls) count in its stripe, `workers`
  countServerHandshakesIn(new Stripe(shm, shm.workers))
  // revoked sessions this node kept before a restart, in the table before any worker reads it
  const revocations = new RevocationHub(shm.i32, config.global.stateDir, log)
  revocations.load()
  // cluster mode: loaded only with [cluster] (no Redis client otherwise); Redis may be down, the node starts anyway
  const cluster: Cluster | null = config.cluster === null ? null : await (await import('./cluster/index.js')).Cluster.start(config.cluster, shm.i32, log, revocations)
  const slots = new SlotRegistry(shm)
  let generation = 1
  // the generation endpoint listens before any worker can route to its socket; it runs only
  // when a service routes to it or it has its own listener (a model runner costs memory)
  const wantGen = (c: Config): boolean => c.generation.enabled && (c.services.some((s) => s.kind === 'generate') || c.generation.listen !== '')
  // in cluster mode the generation budgets of the keys are leased over the cluster's Redis connection
  const genCluster: BudgetCluster | null = cluster === null
    ? null
    : {
        prefix: cluster.conf.prefix,
        node: cluster.conf.node,
        syncIntervalMs: cluster.conf.syncIntervalMs,
        nodeTtlMs: cluster.conf.nodeTtlMs,
        up: () => cluster.health.up,
        nodes: () => cluster.status().nodes.length,
        run: (script, keys, args) => cluster.health.track(() => runScript(cluster.redis, script, keys, args)),
      }
  let gen: GenerationService | null = wantGen(config) ? await startGeneration(config.generation, log, genCluster, sharedGen) : null
  const firstSlots = slots.apply(config)
  slots.commit(firstSlots)
  const supervisor = new Supervisor(shm, config, firstSlots, generation, log)
  supervisor.onRevoke = (r) => revocations.local(r)
  // the workers relay remote models' replies themselves ([generation] relay = "worker"); the service admits them
  const relayTo = (g: GenerationService): void => {
    supervisor.onGen = (index, m, reply) => g.broker.handle(index, m, reply)
    supervisor.onGenExit = (index) => g.broker.dropWorker(index)
    g.broker.watch((l) => supervisor.publishGenListing(l))
  }
  if (gen !== null) relayTo(gen)
  const health = new HealthChecker(shm, log)
  // ACME certificates: those in storage before the workers start (each worker starts with them), orders once the
  // workers run (they answer the challenges; until then a missing certificate's hosts get the default one)
  const acme = new AcmeManager(config, log, (state) => supervisor.publishAcme(state))
  void acme.update(config)

  // [providers.file] watch: a change there reloads as SIGHUP does (set up once lb is ready, below)
  const watcher = new ConfigWatch(() => reload(), log)
  // reloads and API changes are applied one at a time, in order
  let queue: Promise<unknown> = Promise.resolve()
  const apply = (candidate: Config): Promise<string[]> => {
    const result = queue.then(async () => {
      const over = fits(candidate)
      if (over.length > 0) throw lbError('LB_ERR_CONFIG_INVALID', { file: candidate.file, problems: over.map((p) => `  ${candidate.file}: ${p}`).join('\n') })
      // a file that still says port 0 asks for the ports already bound, not for new ones
      const asBound = withBoundPorts(candidate, supervisor.boundPorts)
      const kept = STATIC_KEYS.filter((k) => JSON.stringify(asBound[k]) !== JSON.stringify(config[k]))
      if (kept.length > 0) log.warn('these sections need a restart; their running values stay', { sections: kept })
      // uWS's head limit was fixed when its binary loaded (loadUws)
      const nextLimits = candidate.limits.maxHeaderBytes === config.limits.maxHeaderBytes ? candidate.limits : { ...candidate.limits, maxHeaderBytes: config.limits.maxHeaderBytes }
      if (nextLimits !== candidate.limits) log.warn('limits.max_header_bytes needs a restart; its running value stays', { running: config.limits.maxHeaderBytes })
      if (candidate.limits.sessionRevocations !== limits.sessionRevocations) log.warn('limits.session_revocations needs a restart; the table keeps its size', { running: limits.sessionRevocations })
      const next: Config = { ...candidate, ...Object.fromEntries(STATIC_KEYS.map((k) => [k, config[k]])), limits: nextLimits }
      if (gen === null && wantGen(next)) {
        // the first generate service: start the endpoint (with the running [generation] settings) before routing to it
        try {
          gen = await startGeneration(next.generation, log, genCluster, sharedGen)
          const started = gen
          relayTo(started)
          management?.attachGen(() => started.stats())
        } catch (err) {
          log.error('the generation endpoint failed to start; its routes answer 502', { error: (err as Error).message })
        }
      }
      const slotMap = slots.apply(next)
      generation++
      const errors = await supervisor.broadcast(next, slotMap, generation)
      if (errors.length > 0) log.error('some workers rejected the configuration', { errors })
      config = next
      watcher.update(config)
      slots.commit(slotMap)
      health.update(config, slots)
      void acme.update(config)
      log.info('configuration applied', { generation })
      return errors
    })
    queue = result.catch(() => undefined)
    return result
  }
  const reload = async (): Promise<void> => {
    void notifier.reloading()
    let ok = true
    try {
      await apply(await loadConfigAsync(configPath, apiStateOverlay))
    } catch (err) {
      // an invalid file, or one that does not fit the capacities: nothing changed
      ok = false
      log.error('reload rejected: the running configuration stays', { error: (err as Error).message })
    }
    Atomics.add(shm.i32, ok ? H_RELOADS : H_RELOAD_FAILS, 1)
    Atomics.store(shm.i32, H_LAST_RELOAD_OK, ok ? 1 : 0)
    Atomics.store(shm.i32, H_LAST_RELOAD_SEC, Math.floor(Date.now() / 1000))
    // the reload is over either way: a rejected file leaves the running configuration serving
    void notifier.ready(ok ? `configuration generation ${generation} applied` : 'reload rejected: the running configuration stays')
  }

  let management: Management | null = null
  let stopping: Promise<void> | null = null
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      void notifier.stopping()
      await management?.close()
      log.info('stopping: draining requests in flight', { timeout_ms: config.global.drainTimeoutMs })
      health.close()
      watcher.close()
      acme.close()
      const cut = await supervisor.drain(config.global.drainTimeoutMs)
      if (cut > 0) log.warn('drain_timeout reached: requests cut', { cut, drain_timeout_ms: config.global.drainTimeoutMs })
      await gen?.close()
      await cluster?.close()
      log.info('stopped')
    })()
    return stopping
  }
  // Listeners come up in this order, so that a client that waits for one port
  // never finds another closed: the generation socket (above), the management
  // surfaces (they accept, and hold what they read until ready), the tcp and
  // mTLS listeners in worker 0, and the web entry points in every worker last.
  // Only then is lb ready: the surfaces answer, the log says so, systemd hears READY=1.
  try {
    management = await startManagement({ configPath, config: () => config, generation: () => generation, shm, slots, log, apply, fits, startedAt, middlewareStatus: (name) => supervisor.middlewareStatus(name), certificates: acme, cluster: () => cluster?.status() ?? null, ...(cluster === null ? {} : { clusterClear: (ka: number, kb: number) => cluster.clearSource(ka, kb) }) }, cluster?.config ?? null)
    const g = gen
    if (g !== null) management.attachGen(() => g.stats())
    await supervisor.start()
  } catch (err) {
    acme.close()
    await management?.close()
    await gen?.close()
    await cluster?.close()
    throw err
  }
  // entry points on port 0 are from now on the ports they got (what the surfaces show, what reloads compare)
  config = withBoundPorts(config, supervisor.boundPorts)
  for (const e of config.entrypoints) log.info('listening', { entrypoint: e.name, address: formatHostPort(e.host, e.port), protocol: e.protocol })
  health.update(config, slots)
  acme.begin()
  // a certificate change on these replaces their listeners (core/net/listener-swap.ts)
  const challenges = tlsChallengeEntrypoints(config.certificatesResolvers)
  const swapped = config.entrypoints.filter((e) => e.protocol === 'https' && e.engine !== 'node' && !isTerminated(e, challenges)).map((e) => e.name)
  const swapWarning = listenerSwapWarning(swapped)
  if (swapWarning !== null) log.warn(swapWarning, { entrypoints: swapped })
  management.open()
  watcher.update(config)
  const entrypoints = config.entrypoints.map((e) => `${e.name}=${e.protocol}://${formatHostPort(e.host, e.port)}`)
  const genListeners = gen === null ? {} : { generation_socket: gen.socketPath, generation: gen.tcpAddress === null ? undefined : formatHostPort(gen.tcpAddress.host, gen.tcpAddress.port) }
  log.info('ready', { config: config.file, workers: config.global.workers, entrypoints, ...management.listeners, ...genListeners })
  void notifier.ready(`serving ${entrypoints.join(', ')}`)
  return { config: () => config, generation: () => generation, shm, slots, supervisor, log, reload, apply, stop }
}
