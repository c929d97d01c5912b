// Control-plane entry (the main thread): loads the config, allocates shared
// memory, starts the data-plane workers, health checks and the connection
// census, and handles signals: SIGHUP reloads (an invalid config is rejected
// and the running one stays), SIGTERM/SIGINT drain and exit 0.
import { mkdirSync } from 'node:fs'
import type { Config } from './config/load.js'
import { loadConfig } from './config/load.js'
import { createLogger, type Logger } from './log.js'
import { createShm } from './shm/layout.js'
import { Census } from './control/census.js'
import { HealthChecker } from './control/health-check.js'
import { SlotRegistry } from './control/slots.js'
import { Supervisor } from './control/supervisor.js'
import { loadUws } from './worker/http.js'

/** Static settings a reload cannot change: the running values stay and a warning says so. */
const STATIC_KEYS = ['global', 'entrypoints'] as const

export interface Running {
  readonly config: () => Config
  reload (): Promise<void>
  stop (): Promise<void>
}

export async function run (configPath: string, log: Logger = createLogger('info')): Promise<Running> {
  let config = loadConfig(configPath)
  log = createLogger(config.global.logLevel)
  loadUws() // fail before starting anything when the native binary cannot load
  mkdirSync(config.global.stateDir, { recursive: true })
  const shm = createShm(config.global.workers)
  const slots = new SlotRegistry(shm)
  let generation = 1
  const supervisor = new Supervisor(shm, config, slots.apply(config), generation, log)
  await supervisor.start()
  const health = new HealthChecker(shm, log)
  health.update(config, slots)
  const census = new Census(shm, config.entrypoints, config.global.maxConnections, (on) => supervisor.setAccepting(on))
  census.start()
  log.info('started', {
    config: config.file,
    workers: config.global.workers,
    entrypoints: config.entrypoints.map((e) => `${e.name}=${e.protocol}://${e.host.includes(':') ? `[${e.host}]` : e.host}:${e.port}`),
  })

  let reloading: Promise<void> = Promise.resolve()
  const reload = (): Promise<void> => {
    reloading = reloading.then(async () => {
      let next: Config
      try {
        next = loadConfig(configPath)
      } catch (err) {
        log.error('reload rejected: the running configuration stays', { error: (err as Error).message })
        return
      }
      const kept = STATIC_KEYS.filter((k) => JSON.stringify(next[k]) !== JSON.stringify(config[k]))
      if (kept.length > 0) log.warn('reload: these sections need a restart; their running values stay', { sections: kept })
      next = { ...next, global: config.global, entrypoints: config.entrypoints }
      const slotMap = slots.apply(next)
      generation++
      const errors = await supervisor.broadcast(next, slotMap, generation)
      if (errors.length > 0) log.error('reload: some workers rejected the configuration', { errors })
      config = next
      health.update(config, slots)
      log.info('reloaded', { generation })
    })
    return reloading
  }

  let stopping: Promise<void> | null = null
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      log.info('stopping: draining requests in flight', { timeout_ms: config.global.drainTimeoutMs })
      census.stop()
      health.close()
      await supervisor.drain(config.global.drainTimeoutMs)
      log.info('stopped')
    })()
    return stopping
  }
  return { config: () => config, reload, stop }
}
