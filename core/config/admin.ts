// Static configuration of the management surfaces: [admin] (config API),
// [dashboard] (dashboard API, page and /metrics) and [runtime_socket]. All are
// read at start-up only; changing them needs a restart.
import { type HashKind, parseEntry } from '../auth/htpasswd.js'
import { type Checker, join } from './check.js'
import { DEFAULTS } from './defaults.js'
import { resolvePath } from './check.js'
import { type HostPort, parseListenAddress } from './host-port.js'
import { isMappedV4, parseIp } from '../net/ip.js'

export interface Credentials {
  /** "user:hash" entries (bcrypt or {SHA}) for basic auth */
  readonly users: readonly string[]
  /** bearer tokens */
  readonly tokens: readonly string[]
}

export interface AdminConf extends Credentials, HostPort {
  readonly enabled: boolean
  /** absolute path of the config API's state file */
  readonly stateFile: string
  /** config API transactions in progress at once (core/admin/config-api/transactions.ts) */
  readonly maxOpenTransactions: number
  /** changes one transaction may stage */
  readonly maxTransactionChanges: number
}

export interface DashboardConf extends HostPort {
  readonly api: boolean
  readonly page: boolean
  readonly metrics: boolean
  readonly insecure: boolean
}

export interface RuntimeSocketConf {
  readonly enabled: boolean
  /** absolute path of the unix socket */
  readonly path: string
}

// no blanks in the name or the hash (parseEntry alone would trim the hash)
const USER = /^[^:\s]+:\S+$/
/** the kinds [admin] has always taken, as its problem message says; apr1 and MD5-crypt are the basicAuth plugin's */
const ADMIN_KINDS: readonly HashKind[] = ['bcrypt', 'sha1']

/** 127.0.0.0/8, ::1 (and its IPv4-mapped form) or "localhost". */
export function isLoopbackHost (host: string): boolean {
  if (host === 'localhost') return true
  const ip = parseIp(host)
  if (ip === null) return false
  if (isMappedV4(ip)) return ip[12] === 127
  return ip.subarray(0, 15).every((b) => b === 0) && ip[15] === 1
}

function address (c: Checker, t: Record<string, unknown>, p: string, def: string): HostPort {
  const a = c.string(t, 'address', p, def)
  const hp = parseListenAddress(a)
  if (hp === null) c.problem(join(p, 'address'), 'an address like "127.0.0.1:5555" or "[::1]:5555" (port 0: any free port)', a)
  return hp ?? parseListenAddress(def)!
}

export function checkAdmin (c: Checker, raw: unknown, stateDir: string): AdminConf {
  const p = 'admin'
  const d = DEFAULTS.admin
  const t = c.table(raw, p, ['enabled', 'address', 'users', 'tokens', 'state_file', 'max_open_transactions', 'max_transaction_changes'])
  const users = c.strings(t, 'users', p, d.users)
  users.forEach((u, i) => {
    const hash = u.slice(u.indexOf(':') + 1)
    // only hashes the authenticator accepts (parsed as it parses them, so a bcrypt
    // cost it cannot use fails here and not at the first login): a plain password
    // here would lock everyone out
    const e = parseEntry(u)
    if (!USER.test(u) || typeof e === 'string' || !ADMIN_KINDS.includes(e.kind)) {
      c.problem(join(join(p, 'users'), i), '"user:hash" with a bcrypt ($2y$...) or {SHA} hash', u.includes(':') ? `${u.slice(0, u.indexOf(':'))}:<${hash.length} characters>` : '<not user:hash>')
    }
  })
  const tokens = c.strings(t, 'tokens', p, d.tokens)
  tokens.forEach((tk, i) => { if (tk.length < 16) c.problem(join(join(p, 'tokens'), i), 'a token of at least 16 characters', `${tk.length} characters`) })
  const enabled = c.bool(t, 'enabled', p, d.enabled)
  const hp = address(c, t, p, d.address)
  // an unauthenticated config API must not be reachable from other hosts
  if (enabled && users.length === 0 && tokens.length === 0 && !isLoopbackHost(hp.host)) {
    c.problems.push(`${join(p, 'address')}: ${hp.host} is not a loopback address and [admin] has no users or tokens; add credentials or bind 127.0.0.1`)
  }
  return {
    enabled,
    host: hp.host,
    port: hp.port,
    users,
    tokens,
    stateFile: resolvePath(stateDir, c.string(t, 'state_file', p, d.stateFile)),
    maxOpenTransactions: c.int(t, 'max_open_transactions', p, d.maxOpenTransactions, 1, 10_000),
    maxTransactionChanges: c.int(t, 'max_transaction_changes', p, d.maxTransactionChanges, 1, 100_000),
  }
}

export function checkDashboard (c: Checker, raw: unknown, admin: AdminConf): DashboardConf {
  const p = 'dashboard'
  const d = DEFAULTS.dashboard
  const t = c.table(raw, p, ['address', 'api', 'page', 'metrics', 'insecure'])
  const hp = address(c, t, p, d.address)
  const conf = {
    host: hp.host,
    port: hp.port,
    api: c.bool(t, 'api', p, d.api),
    page: c.bool(t, 'page', p, d.page),
    metrics: c.bool(t, 'metrics', p, d.metrics),
    insecure: c.bool(t, 'insecure', p, d.insecure),
  }
  const on = conf.api || conf.page || conf.metrics
  if (on && !conf.insecure && admin.users.length === 0 && admin.tokens.length === 0) {
    c.problems.push(`${p}: authentication is required (insecure = false) but [admin] has no users or tokens; add credentials or set insecure = true`)
  }
  if (on && admin.enabled && hp.port !== 0 && hp.host === admin.host && hp.port === admin.port) {
    c.problems.push(`${join(p, 'address')}: ${hp.host}:${hp.port} is already used by [admin]`)
  }
  return conf
}

export function checkRuntimeSocket (c: Checker, raw: unknown, stateDir: string): RuntimeSocketConf {
  const p = 'runtime_socket'
  const d = DEFAULTS.runtimeSocket
  const t = c.table(raw, p, ['enabled', 'path'])
  const path = c.string(t, 'path', p, d.path)
  if (path === '') c.problem(join(p, 'path'), 'a socket path', path)
  return { enabled: c.bool(t, 'enabled', p, d.enabled), path: resolvePath(stateDir, path) }
}
