// The registry: the only place that maps a middleware's `type` to a plugin.
// Built-ins are listed here by name. Any other type names a third-party
// module, by path (relative to the config file: "./plugins/x.js") or by
// package name ("lb-plugin-x"), whose default export is a PluginDef written
// for this lb's plugin API (PLUGIN_API).
//
// Importing a module is async but config validation is sync, so modules are
// imported first (loadPluginModules, from loadConfigAsync in the control
// plane and from each worker before it builds a generation) and looked up
// here afterwards. A module is imported once per process: a changed plugin
// file needs a restart, its middlewares' config reloads like any other.
import { createRequire } from 'node:module'
import { isAbsolute, join as joinPath, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type Checker, type PluginDef, type Table, PLUGIN_API, describe, join } from 'lb/plugin'
// the registry's one arrow into core besides lb/plugin: making lb/plugin importable by the modules it loads
import { providePluginApi } from '../core/plugin-resolve.js'
import basicAuth from './basic-auth.js'
import compress from './compress.js'
import headers from './headers.js'
import ipAllowList from './ip-allow-list.js'
import jwt from './jwt.js'
import oidc from './oidc.js'
import rateLimit from './rate-limit.js'
import redirectScheme from './redirect-scheme.js'
import addPrefix from './add-prefix.js'
import replacePath from './replace-path.js'
import stripPrefix from './strip-prefix.js'
import chain from './chain.js'
import stripPrefixRegex from './strip-prefix-regex.js'
import replacePathRegex from './replace-path-regex.js'
import redirectRegex from './redirect-regex.js'
import forwardAuth from './forward-auth.js'
import retry from './retry.js'
import inFlightReq from './in-flight-req.js'
import circuitBreaker from './circuit-breaker.js'
import grpcWeb from './grpc-web.js'
import errors from './errors.js'
import contentType from './content-type.js'
import buffering from './buffering.js'

const BUILTINS: readonly PluginDef[] = [rateLimit, basicAuth, jwt, oidc, redirectScheme, compress, headers, ipAllowList,
  stripPrefix, addPrefix, replacePath, chain, forwardAuth, stripPrefixRegex, replacePathRegex, redirectRegex, retry, inFlightReq,
  circuitBreaker, grpcWeb, errors, contentType, buffering] as PluginDef[]

export const PLUGINS: ReadonlyMap<string, PluginDef> = new Map<string, PluginDef>(BUILTINS.map((p) => [p.name, p]))

interface Loaded {
  readonly def: PluginDef | null
  /** why the module could not be used ('' when def is set) */
  readonly error: string
}

/** Third-party modules by (config folder, plugins folder, type as written). */
const external = new Map<string, Loaded>()

const isPath = (type: string): boolean => type.startsWith('./') || type.startsWith('../') || isAbsolute(type)
const PACKAGE = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*(?:\/[A-Za-z0-9._~/-]+)?$/

/** A type that is not a built-in and looks like a path or a package name is a plugin module. */
export function isModuleType (type: string): boolean {
  return !PLUGINS.has(type) && (isPath(type) || PACKAGE.test(type))
}

const keyOf = (type: string, baseDir: string, pluginsDir: string): string => `${baseDir}\u0000${pluginsDir}\u0000${type}`

/**
 * File URL of a plugin module: a path from the config's folder; a package from
 * there (its node_modules or above), then from global.plugins_dir, then from lb's own install.
 */
function resolveModule (type: string, baseDir: string, pluginsDir: string): string {
  if (isPath(type)) return pathToFileURL(resolve(baseDir, type)).href
  for (const dir of pluginsDir === '' ? [baseDir] : [baseDir, pluginsDir]) {
    try {
      return pathToFileURL(createRequire(joinPath(dir, 'lb.toml')).resolve(type)).href
    } catch {}
  }
  return import.meta.resolve(type)
}

function checkDef (v: unknown): string {
  if (typeof v !== 'object' || v === null) return 'its default export is not a plugin definition (export default definePlugin({ name, validate, create }))'
  const d = v as Record<string, unknown>
  if (typeof d.name !== 'string' || d.name === '') return 'its default export has no name'
  if (typeof d.validate !== 'function') return 'its default export has no validate function'
  if (typeof d.create !== 'function') return 'its default export has no create function'
  if (d.api === undefined) return `it declares no plugin API version (add api: ${PLUGIN_API}, the version of this lb, once it works with it)`
  if (d.api !== PLUGIN_API) return `it was written for plugin API ${typeof d.api === 'number' ? d.api : describe(d.api)}, and this lb provides plugin API ${PLUGIN_API}`
  return ''
}

/** Imports every plugin module among `types` not imported yet; failures are kept for validation to report. */
export async function loadPluginModules (types: Iterable<string>, baseDir: string, pluginsDir: string): Promise<void> {
  for (const type of types) {
    if (!isModuleType(type)) continue
    const key = keyOf(type, baseDir, pluginsDir)
    if (external.get(key)?.def != null) continue
    providePluginApi()
    let loaded: Loaded
    try {
      const mod = await import(resolveModule(type, baseDir, pluginsDir)) as { default?: unknown }
      const error = checkDef(mod.default)
      loaded = { def: error === '' ? mod.default as PluginDef : null, error }
    } catch (err) {
      loaded = { def: null, error: `cannot import it: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}` }
    }
    external.set(key, loaded)
  }
}

/** The plugin a middleware type names (a built-in, or a module loaded for that config folder). */
export function pluginFor (type: string, baseDir: string, pluginsDir: string): PluginDef | undefined {
  return PLUGINS.get(type) ?? external.get(keyOf(type, baseDir, pluginsDir))?.def ?? undefined
}

export function checkPluginConf (c: Checker, type: string, t: Table, path: string, baseDir: string, pluginsDir: string): unknown {
  const def = pluginFor(type, baseDir, pluginsDir)
  const p = join(path, 'type')
  if (def === undefined) {
    const expected = `a middleware type (${[...PLUGINS.keys()].join(', ')}) or a plugin module path or package name`
    if (!isModuleType(type)) c.problem(p, expected, type)
    else {
      const why = external.get(keyOf(type, baseDir, pluginsDir))?.error ?? 'it was not imported (configs naming plugin modules load with loadConfigAsync)'
      c.problems.push(`${p}: expected ${expected}, found ${describe(type)} (${why})`)
    }
    return null
  }
  let conf: unknown
  try {
    conf = def.validate(c, t, path, baseDir)
  } catch (err) {
    c.problems.push(`${path}: plugin ${JSON.stringify(def.name)} failed while checking its config: ${err instanceof Error ? err.message : String(err)}`)
    return null
  }
  // configs cross to the workers by structured clone: functions and class instances cannot
  try {
    if (!PLUGINS.has(type)) structuredClone(conf)
  } catch (err) {
    c.problems.push(`${path}: plugin ${JSON.stringify(def.name)} returned a config that cannot be sent to workers (plain data only): ${(err as Error).message}`)
    return null
  }
  return conf
}
