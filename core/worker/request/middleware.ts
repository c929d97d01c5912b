// One middleware instance of one config generation: its plugin's hooks, made
// by the plugin's create(). A plugin that fails to start (create throws,
// returns something that is not hooks, or its module did not load in this
// worker) disables only itself, fail-closed: its routes answer 500 and the
// reason is logged once (Traefik marks such a middleware disabled). Skipping
// it instead could open a route that an auth middleware was meant to guard.
import type { MiddlewareConf } from '../../config/dynamic.js'
import { formatError } from '../../errors.js'
import type { Logger } from '../../log.js'
import { type Hooks, type PluginStatus, HANDLED } from '../../plugin.js'
import type { Shm } from '../../shm/layout.js'
import type { Revocation } from '../../shm/revocations.js'
import { pluginErrorReply } from './chain.js'
import { pluginFor } from '../../../plugins/index.js'

function checkHooks (h: unknown): string {
  if (typeof h !== 'object' || h === null) return 'create() did not return hooks'
  const o = h as Record<string, unknown>
  for (const k of ['onRequest', 'onResponse', 'teardown']) {
    if (o[k] !== undefined && typeof o[k] !== 'function') return `create() returned a ${k} that is not a function`
  }
  return ''
}

/** What a worker gives middleware instances beyond shared memory: their way to the control plane. */
export interface PluginHost {
  /** a middleware instance's status (to the control plane, for the dashboard API) */
  readonly status: (middleware: string, status: PluginStatus, message: string) => void
  /** PluginEnv.shareRevocation */
  readonly shareRevocation: (r: Revocation) => Promise<void>
}

export function createMiddleware (m: MiddlewareConf, baseDir: string, pluginsDir: string, shm: Shm, log: Logger, host: PluginHost): Hooks {
  const mlog = log.child({ middleware: m.name })
  let reason: string
  const def = pluginFor(m.type, baseDir, pluginsDir)
  if (def === undefined) reason = `plugin ${JSON.stringify(m.type)} is not loaded in this worker`
  else {
    try {
      const hooks = def.create(m.conf, { log: mlog, shm, name: m.name, setStatus: (s, message) => host.status(m.name, s, message), shareRevocation: host.shareRevocation })
      reason = checkHooks(hooks)
      if (reason === '') return hooks
    } catch (err) {
      reason = err instanceof Error ? err.message : String(err)
    }
  }
  mlog.error(formatError('LB_ERR_PLUGIN_INIT', { middleware: m.name, reason }), { code: 'LB_ERR_PLUGIN_INIT' })
  const reply = pluginErrorReply(m.name)
  Object.freeze(reply.headers)
  Object.freeze(reply)
  return {
    onRequest (ctx) {
      ctx.reply = reply
      return HANDLED
    },
  }
}

/** Retires a generation's middleware instances (a reload replaced them, or the worker stops): each plugin's teardown, once. */
export function retireMiddlewares (instances: ReadonlyMap<string, Hooks>, log: Logger): void {
  for (const [name, h] of instances) {
    if (h.teardown === undefined) continue
    try {
      h.teardown()
    } catch (err) {
      log.error(formatError('LB_ERR_PLUGIN_TEARDOWN', { middleware: name, reason: err instanceof Error ? err.message : String(err) }), { code: 'LB_ERR_PLUGIN_TEARDOWN' })
    }
  }
}
