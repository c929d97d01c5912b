// The registry of built-in plugins: the only list of them. Middlewares in the
// config name a plugin by `type`.
import type { Checker, Table } from '../core/config/check.js'
import { join } from '../core/config/check.js'
import type { PluginDef } from '../core/plugin.js'

export const PLUGINS: ReadonlyMap<string, PluginDef> = new Map<string, PluginDef>([])

export function checkPluginConf (c: Checker, type: string, t: Table, path: string, baseDir: string): unknown {
  const def = PLUGINS.get(type)
  if (def === undefined) {
    c.problem(join(path, 'type'), `a middleware type (${[...PLUGINS.keys()].join(', ') || 'none available'})`, type)
    return null
  }
  return def.validate(c, t, path, baseDir)
}
