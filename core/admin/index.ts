// Starts the management surfaces the config enables, in the control plane:
// the config API on [admin], the dashboard API, page and /metrics on
// [dashboard], and the runtime socket. A surface that cannot start makes
// start-up fail (a port in use must not go unnoticed).
//
// They listen before the data-plane workers do (core/main.ts says why), but
// answer nothing before open(): a request that comes early is held, not
// refused, and served once lb is ready.
import type http from 'node:http'
import type net from 'node:net'
import { formatHostPort } from '../config/static.js'
import { lbError } from '../errors.js'
import { boundPort } from '../net/listen.js'
import { Authenticator } from './auth.js'
import { configApi } from './config-api/config-api.js'
import { ConfigStore } from './config-api/config-store.js'
import type { AdminContext } from './context.js'
import { dashboardApi } from './traefik/dashboard-api.js'
import { dashboardData } from './traefik/dashboard-data.js'
import { TEXT_ERRORS, dashboardPage } from './dashboard-page.js'
import { closeListener, startListener, type Surface } from './http-server.js'
import type { GenStats } from '../gen/stats.js'
import { type Metrics, createMetrics } from './metrics.js'
import { closeRuntimeSocket, startRuntimeSocket } from './runtime/runtime-socket.js'
import { Sampler } from './sampler.js'
import type { SharedConfig } from '../cluster/shared-config.js'

export interface Management {
  /** Exposes the generation service's stats() on /metrics, the dashboard's /api/lb/generation and `show models`. */
  attachGen (stats: () => GenStats): void
  /** Serves what the listeners accepted and hold, and everything after: lb is ready. */
  open (): void
  /** What listens, for the "ready" log line: admin and dashboard addresses, the runtime socket's path. */
  readonly listeners: Readonly<Record<string, string>>
  close (): Promise<void>
}

export type Base = Omit<AdminContext, 'store' | 'sampler' | 'gen'>

/** `shared`: the cluster's config state ([cluster]), or null for a single node. */
export async function startManagement (base: Base, shared: SharedConfig | null = null): Promise<Management> {
  const store = new ConfigStore(base.configPath, base.apply, base.fits, base.log, shared)
  const sampler = new Sampler({ ...base, store })
  // the one channel to the generation service, filled by attachGen (core/main.ts starts that service after this)
  let genStats: (() => GenStats) | null = null
  const ctx: AdminContext = { ...base, store, sampler, gen: () => genStats?.() ?? null }
  sampler.start()
  const conf = ctx.config()
  let open!: () => void
  const ready = new Promise<void>((resolve) => { open = resolve })
  const listeners: Record<string, string> = {}
  const closers: Array<() => Promise<void>> = [async () => sampler.stop()]
  let metrics: Metrics | null = null
  const close = async (): Promise<void> => { await Promise.all(closers.splice(0).map((c) => c())) }
  const listen = async (name: string, host: string, port: number, surfaces: Surface[], auth: Authenticator | null): Promise<void> => {
    let server: http.Server
    try {
      server = await startListener({ name, host, port, surfaces, auth, log: ctx.log.child({ surface: name }), ready })
    } catch (err) {
      throw lbError('LB_ERR_ADMIN_LISTEN', { address: `${host}:${port}`, surface: name, reason: (err as Error).message })
    }
    closers.push(() => closeListener(server))
    // the bound port: the kernel's choice when the config says port 0
    listeners[name] = formatHostPort(host, boundPort(server))
    ctx.log.info('listening', { surface: name, address: listeners[name], auth: auth !== null })
  }
  try {
    const auth = new Authenticator(conf.admin)
    if (conf.admin.enabled) await listen('admin', conf.admin.host, conf.admin.port, [configApi(ctx)], auth.required ? auth : null)
    const d = conf.dashboard
    const surfaces: Surface[] = []
    if (d.api) surfaces.push(dashboardApi(ctx))
    if (d.page) surfaces.push(dashboardPage())
    if (d.api || d.page) surfaces.push(dashboardData(ctx))
    if (d.metrics) {
      metrics = createMetrics(ctx)
      const registry = metrics.registry
      surfaces.push({
        name: 'metrics (Prometheus)',
        routes: [{
          method: 'GET', path: '/metrics', help: 'Prometheus metrics, all workers', mutates: false,
          handler: async () => ({ status: 200, text: await registry.metrics(), contentType: registry.contentType }),
        }],
        ...TEXT_ERRORS,
      })
    }
    if (surfaces.length > 0) await listen('dashboard', d.host, d.port, surfaces, d.insecure ? null : auth)
    const rs = conf.runtimeSocket
    if (rs.enabled) {
      const server: net.Server = await startRuntimeSocket(ctx, rs.path, ready)
      closers.push(() => closeRuntimeSocket(server, rs.path))
      listeners.runtime_socket = rs.path
      ctx.log.info('runtime socket started', { path: rs.path })
    }
  } catch (err) {
    await close()
    throw err
  }
  ctx.log.info('management started', { config_version: store.version })
  const attachGen = (stats: () => GenStats): void => {
    genStats = stats
    metrics?.attachGen(stats)
  }
  return { close, open, listeners, attachGen }
}
