// TOML text → validated, defaulted, deep-frozen Config, in one place. Every
// problem is collected and reported at once in one LB_ERR_CONFIG_INVALID whose
// lines each name the file, the key path, what was expected and what was found.
import { readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import toml from 'toml'
import { Checker, deepFreeze, resolvePath } from './check.js'
import { type MiddlewareChecker, type MiddlewareConf, type RouterConf, type ServiceConf, checkMiddlewareServices, checkMiddlewares, checkRouters, checkServices, middlewareTypes } from './dynamic.js'
import { type EntryPointConf, type GlobalConf, type LimitsConf, type TimeoutsConf, checkEntryPointServices, checkEntryPoints, checkGlobal, checkLimits, checkTimeouts } from './static.js'
import { type AdminConf, type DashboardConf, type RuntimeSocketConf, checkAdmin, checkDashboard, checkRuntimeSocket } from './admin.js'
import { capacityProblems, chooseCapacities } from './capacity.js'
import { lbError } from '../errors.js'
import type { GenerationConf } from './generation.js'
import { type AcmeResolverConf, checkResolvers, checkRouterResolvers } from './acme.js'
import { type ClusterConf, checkCluster } from './cluster.js'
import { type FileProviderConf, checkProviders, mergeProviderFiles, providerFiles } from './file-provider.js'
import { type TracingConf, checkTracing } from './tracing.js'

export interface Config {
  /** absolute path of the file this was read from ('' for text) */
  readonly file: string
  readonly baseDir: string
  readonly global: GlobalConf
  readonly timeouts: TimeoutsConf
  readonly limits: LimitsConf
  readonly entrypoints: readonly EntryPointConf[]
  readonly routers: readonly RouterConf[]
  readonly services: readonly ServiceConf[]
  readonly middlewares: readonly MiddlewareConf[]
  readonly admin: AdminConf
  readonly dashboard: DashboardConf
  readonly runtimeSocket: RuntimeSocketConf
  readonly generation: GenerationConf
  /** ACME certificate resolvers (static: a change needs a restart) */
  readonly certificatesResolvers: readonly AcmeResolverConf[]
  /** [cluster]; null = a single node (no Redis) */
  readonly cluster: ClusterConf | null
  /** [providers.file]: more dynamic configuration in a directory (file-provider.ts); null = none */
  readonly providers: FileProviderConf | null
  /** [tracing]: OpenTelemetry traces (tracing.ts); null = off. Reloads. */
  readonly tracing: TracingConf | null
}

/**
 * The sections that layers above core/config check, handed to the loader so
 * that it imports none of them: config stays the bottom layer. core/configure.ts
 * binds lb's own (the plugin registry, the generation checker).
 */
export interface ConfigSections {
  /** checks the [generation] table (core/gen/config.ts) */
  readonly generation: (c: Checker, raw: unknown, path: string, baseDir: string) => GenerationConf
  /** validates one middleware's plugin config (plugins/index.ts) */
  readonly plugin: MiddlewareChecker
  /** imports the plugin modules a config names, before it is validated (plugins/index.ts) */
  readonly loadPlugins: (types: Iterable<string>, baseDir: string, pluginsDir: string) => Promise<void>
}

/** Changes the parsed TOML before validation (the config API's state overlay, core/admin/config-api/state.ts). */
export type RawOverlay = (raw: unknown, file: string) => unknown

const TOP_KEYS = ['global', 'timeouts', 'limits', 'entrypoints', 'routers', 'services', 'middlewares', 'admin', 'dashboard', 'runtime_socket', 'generation', 'certificates_resolvers', 'cluster', 'providers', 'tracing']

/** The main file's parsed TOML with the provider files' routers, services and middlewares merged in. */
export interface Merged {
  readonly raw: unknown
  /** "routers.NAME" → the file that defined it (problems name it) */
  readonly origins: ReadonlyMap<string, string>
  /** what the merge itself refused (a name defined twice), each naming its file */
  readonly problems: readonly string[]
}

/** Reads and merges the provider files `raw` names ([providers.file]); LB_ERR_CONFIG_READ / _PARSE name the file. */
export function withProviders (raw: unknown, file: string): Merged {
  const baseDir = file === '' ? process.cwd() : dirname(file)
  const parsed = providerFiles(raw, baseDir).map((f): [string, unknown] => [f, parseToml(readConfigText(f), f)])
  const problems: string[] = []
  const m = mergeProviderFiles(raw, file === '' ? '<config>' : file, parsed, problems)
  return { raw: m.raw, origins: m.origins, problems }
}

/** The file a problem's path ("services.web.servers[0]: ...") belongs to: the longest object key it starts with. */
function originOf (origins: ReadonlyMap<string, string>, problem: string, label: string): string {
  let best = ''
  for (const key of origins.keys()) {
    if (key.length > best.length && problem.startsWith(key) && /^[.:[ ]/.test(problem.slice(key.length))) best = key
  }
  return best === '' ? label : origins.get(best)!
}

/** Validates parsed TOML; `file` only labels messages and resolves relative paths. */
export function buildConfig (raw: unknown, file: string, sections: ConfigSections, merged?: Merged): Config {
  const baseDir = file === '' ? process.cwd() : dirname(file)
  const c = new Checker()
  const top = c.table(raw, '', TOP_KEYS)
  const global = checkGlobal(c, top.global, baseDir)
  const timeouts = checkTimeouts(c, top.timeouts)
  const limits = checkLimits(c, top.limits)
  const entrypoints = checkEntryPoints(c, top.entrypoints, baseDir)
  const generation = sections.generation(c, top.generation, 'generation', baseDir)
  const services = checkServices(c, top.services, baseDir).map((s) => (s.kind === 'generate' ? generateService(c, s, generation) : s))
  checkEntryPointServices(c, entrypoints, services)
  const middlewares = checkMiddlewares(c, top.middlewares, baseDir, global.pluginsDir, sections.plugin)
  checkMiddlewareServices(c, middlewares, services)
  // routers serve the HTTP entry points (http, https); a tcp entry point forwards to its service
  const routers = checkRouters(c, top.routers, entrypoints.filter((e) => e.protocol !== 'tcp').map((e) => e.name), services, middlewares)
  const certificatesResolvers = checkResolvers(c, top.certificates_resolvers, entrypoints, global.stateDir, baseDir)
  checkRouterResolvers(c, routers, certificatesResolvers, entrypoints)
  const admin = checkAdmin(c, top.admin, global.stateDir)
  const dashboard = checkDashboard(c, top.dashboard, admin)
  const runtimeSocket = checkRuntimeSocket(c, top.runtime_socket, global.stateDir)
  const cluster = checkCluster(c, top.cluster, baseDir)
  const providers = checkProviders(c, top.providers, baseDir)
  const tracing = checkTracing(c, top.tracing)
  c.problems.push(...capacityProblems({ services, routers, entrypoints }, chooseCapacities(limits, { services, routers, entrypoints }), limits, false))
  const own = merged?.problems ?? []
  if (c.problems.length > 0 || own.length > 0) {
    const label = file === '' ? '<config>' : file
    const origins = merged?.origins ?? new Map<string, string>()
    const lines = [...own.map((p) => `  ${p}`), ...c.problems.map((p) => `  ${originOf(origins, p, label)}: ${p}`)]
    throw lbError('LB_ERR_CONFIG_INVALID', { file: label, problems: lines.join('\n') })
  }
  return deepFreeze({ file, baseDir, global, timeouts, limits, entrypoints, routers, services, middlewares, admin, dashboard, runtimeSocket, generation, certificatesResolvers, cluster, providers, tracing })
}

/**
 * A `kind = "generate"` service is an upstream group with one server: the
 * generation endpoint's unix socket (core/gen runs it in the control plane),
 * so it is routed, rate-limited and balanced like any backend. The server is
 * never passively marked down: a crashed model runner answers 500 itself.
 */
function generateService (c: Checker, s: ServiceConf, g: GenerationConf): ServiceConf {
  if (!g.enabled) c.problems.push(`services.${s.name}.kind: "generate" needs the generation endpoint, but generation.enabled is false`)
  const runner = { name: 'runner', address: `unix:${g.socket}`, host: '', port: 0, path: g.socket, weight: 1, maxFails: 0, failTimeoutMs: 30_000, check: false, maintenance: false }
  return { ...s, servers: [runner] }
}

/** The text of a config file (`file` already resolved); LB_ERR_CONFIG_READ when it cannot be read. */
export function readConfigText (file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch (err) {
    throw lbError('LB_ERR_CONFIG_READ', { file, reason: (err as Error).message })
  }
}

/** Parsed TOML; LB_ERR_CONFIG_PARSE, with the line and column when known, on a syntax error. */
export function parseToml (text: string, file = ''): unknown {
  try {
    return toml.parse(text)
  } catch (err) {
    // syntax errors carry location.start; semantic ones (an integer outside the 64-bit range,
    // nesting deeper than 500) carry line and column on the error itself
    const e = err as { message: string, location?: { start?: { line: number, column: number } }, line?: number, column?: number }
    const at = e.location?.start ?? (typeof e.line === 'number' ? { line: e.line, column: e.column ?? 0 } : undefined)
    const key = at === undefined ? undefined : keyAt(text, at.line)
    const where = at !== undefined ? ` (line ${at.line}, column ${at.column}${key !== undefined ? `, key ${key}` : ''})` : ''
    throw lbError('LB_ERR_CONFIG_PARSE', { file: file === '' ? '<config>' : file, reason: e.message + where })
  }
}

/** The dotted key assigned on `line` (1-based), under the last [table] header above it; undefined when the line assigns none. */
function keyAt (text: string, line: number): string | undefined {
  const lines = text.split('\n')
  const key = /^\s*([A-Za-z0-9_."'-]+?)\s*=/.exec(lines[line - 1] ?? '')?.[1]
  if (key === undefined) return undefined
  for (let i = line - 2; i >= 0; i--) {
    const table = /^\s*\[\[?\s*([^\]]+?)\s*\]\]?/.exec(lines[i]!)?.[1]
    if (table !== undefined) return `${table}.${key}`
  }
  return key
}

export function parseConfig (text: string, file: string, sections: ConfigSections, overlay?: RawOverlay): Config {
  const merged = withProviders(parseToml(text, file), file)
  return buildConfig(overlay === undefined ? merged.raw : overlay(merged.raw, file), file, sections, merged)
}

export function loadConfig (path: string, sections: ConfigSections, overlay?: RawOverlay): Config {
  const file = resolve(path)
  return parseConfig(readConfigText(file), file, sections, overlay)
}

/**
 * loadConfig, after importing the third-party plugin modules that the file's
 * middlewares name (import() is async; validation stays sync). The file is
 * read and parsed once; the plugin types come from the TOML as written, before
 * the overlay.
 */
export async function loadConfigAsync (path: string, sections: ConfigSections, overlay?: RawOverlay): Promise<Config> {
  const file = resolve(path)
  const merged = withProviders(parseToml(readConfigText(file), file), file)
  const raw = merged.raw
  const baseDir = dirname(file)
  await sections.loadPlugins(middlewareTypes(raw), baseDir, rawPluginsDir(raw, baseDir))
  return buildConfig(overlay === undefined ? raw : overlay(raw, file), file, sections, merged)
}

/** global.plugins_dir as written, resolved as checkGlobal will ('' when absent or not a string: validation reports it). */
function rawPluginsDir (raw: unknown, baseDir: string): string {
  const dir = (raw as { global?: { plugins_dir?: unknown } } | null)?.global?.plugins_dir
  return typeof dir === 'string' && dir !== '' ? resolvePath(baseDir, dir) : ''
}
