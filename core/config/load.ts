// TOML text → validated, defaulted, deep-frozen Config, in one place. Every
// problem is collected and reported at once in one LB_ERR_CONFIG_INVALID whose
// lines each name the file, the key path, what was expected and what was found.
import { readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import toml from 'toml'
import { Checker, deepFreeze } from './check.js'
import { type MiddlewareConf, type RouterConf, type ServiceConf, checkMiddlewares, checkRouters, checkServices } from './dynamic.js'
import { type EntryPointConf, type GlobalConf, type LimitsConf, type TimeoutsConf, checkEntryPoints, checkGlobal, checkLimits, checkTimeouts } from './static.js'
import { lbError } from '../errors.js'
import { checkPluginConf } from '../../plugins/index.js'

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
}

const TOP_KEYS = ['global', 'timeouts', 'limits', 'entrypoints', 'routers', 'services', 'middlewares']

/** Validates parsed TOML; `file` only labels messages and resolves relative paths. */
export function buildConfig (raw: unknown, file: string): Config {
  const baseDir = file === '' ? process.cwd() : dirname(file)
  const c = new Checker()
  const top = c.table(raw, '', TOP_KEYS)
  const global = checkGlobal(c, top.global, baseDir)
  const timeouts = checkTimeouts(c, top.timeouts)
  const limits = checkLimits(c, top.limits)
  const entrypoints = checkEntryPoints(c, top.entrypoints)
  const services = checkServices(c, top.services)
  const middlewares = checkMiddlewares(c, top.middlewares, baseDir, checkPluginConf)
  const routers = checkRouters(c, top.routers, entrypoints.map((e) => e.name), services, middlewares)
  if (c.problems.length > 0) {
    const label = file === '' ? '<config>' : file
    throw lbError('LB_ERR_CONFIG_INVALID', { file: label, problems: c.problems.map((p) => `  ${label}: ${p}`).join('\n') })
  }
  return deepFreeze({ file, baseDir, global, timeouts, limits, entrypoints, routers, services, middlewares })
}

export function parseConfig (text: string, file = ''): Config {
  let raw: unknown
  try {
    raw = toml.parse(text)
  } catch (err) {
    const e = err as { message: string, line?: number, column?: number }
    const where = e.line !== undefined ? ` (line ${e.line}, column ${e.column})` : ''
    throw lbError('LB_ERR_CONFIG_PARSE', { file: file === '' ? '<config>' : file, reason: e.message + where })
  }
  return buildConfig(raw, file)
}

export function loadConfig (path: string): Config {
  const file = resolve(path)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    throw lbError('LB_ERR_CONFIG_READ', { file, reason: (err as Error).message })
  }
  return parseConfig(text, file)
}
