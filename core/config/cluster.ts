// [cluster]: several lb nodes sharing rate limits, configuration and a
// membership through one Redis (docs/cluster.md). Static: read at start only.
// No section = single-node lb, and core/cluster (with the Redis client) is
// never imported.
import { accessSync, constants } from 'node:fs'
import { hostname } from 'node:os'
import { type Checker, type Table, join, resolvePath } from './check.js'
import { DEFAULTS } from './defaults.js'
import { isLoopbackHost } from './admin.js'

export interface ClusterConf {
  /** redis://host:port[/db], rediss://host:port[/db] (TLS) or unix:/path */
  readonly url: string
  /** ACL user ('' = the default user) */
  readonly username: string
  /** inline password ('' = none); never logged */
  readonly password: string
  /** absolute path of a file holding the password ('' = none); read when connecting */
  readonly passwordFile: string
  /** absolute path of a PEM CA bundle for rediss:// ('' = the system's) */
  readonly caFile: string
  readonly prefix: string
  /** this node's name in the membership (default: the host name) */
  readonly node: string
  readonly syncIntervalMs: number
  /** bound on any wait for Redis, ms */
  readonly maxWaitMs: number
  readonly nodeTtlMs: number
  readonly insecure: boolean
  /** Redis Sentinel in place of `url` (null: the one Redis of `url`) */
  readonly sentinel: SentinelConf | null
  /** failed commands in a row (overlapping ones counted once) that make Redis down; HAProxy's `fall` */
  readonly fall: number
  /** answered commands in a row that make a down Redis up again; HAProxy's `rise` */
  readonly rise: number
}

/** Redis Sentinel: the sentinels to ask for the master of `masterName`; lb follows the master through failovers. */
export interface SentinelConf {
  readonly endpoints: ReadonlyArray<{ readonly host: string, readonly port: number }>
  /** `sentinel monitor <name> ...` of the sentinels' configuration */
  readonly masterName: string
  /** rediss:// sentinels: TLS to the sentinels and to the master (`ca_file` applies to both) */
  readonly tls: boolean
  /** the sentinels' own ACL user and password (requirepass of sentinel.conf), '' = none; never logged */
  readonly username: string
  readonly password: string
  readonly passwordFile: string
}

const KEYS = [
  'url', 'username', 'password', 'password_file', 'ca_file', 'prefix', 'node', 'sync_interval', 'max_wait', 'node_ttl', 'insecure',
  'sentinels', 'master_name', 'sentinel_username', 'sentinel_password', 'sentinel_password_file', 'fall', 'rise',
]
const URL_EXPECTED = 'a Redis URL: "redis://host:port", "rediss://host:port" (TLS) or "unix:/path/to/redis.sock"'
const SENTINEL_EXPECTED = 'a Sentinel address: "redis://host:port" or "rediss://host:port" (TLS)'
const NAME = /^[A-Za-z0-9._-]{1,64}$/

export function checkCluster (c: Checker, raw: unknown, baseDir: string): ClusterConf | null {
  if (raw === undefined) return null
  const p = 'cluster'
  const d = DEFAULTS.cluster
  const t: Table = c.table(raw, p, KEYS)
  const insecure = c.bool(t, 'insecure', p, d.insecure)
  const sentinel = t.sentinels === undefined ? null : checkSentinel(c, t, p, baseDir, insecure)
  if (sentinel === null && t.master_name !== undefined) c.problems.push(`${join(p, 'master_name')}: only with sentinels (the master lb asks the sentinels for)`)
  if (sentinel !== null && t.url !== undefined) c.problems.push(`${join(p, 'url')}: set url (one Redis) or sentinels (Redis Sentinel), not both`)
  const url = sentinel === null ? c.string(t, 'url', p) : ''
  checkUrl(c, join(p, 'url'), url, insecure)
  const username = c.string(t, 'username', p, '')
  const { password, passwordFile } = checkPassword(c, t, p, baseDir, '', 'Redis')
  const ca = c.string(t, 'ca_file', p, '')
  const caFile = ca === '' ? '' : resolvePath(baseDir, ca)
  if (caFile !== '' && !readable(caFile)) c.problem(join(p, 'ca_file'), 'a readable PEM file of CA certificates', caFile)
  const prefix = c.string(t, 'prefix', p, d.prefix)
  if (!/^[\x21-\x7e]{1,64}$/.test(prefix)) c.problem(join(p, 'prefix'), '1 to 64 printable characters without blanks', prefix)
  const node = c.string(t, 'node', p, hostname())
  if (!NAME.test(node)) c.problem(join(p, 'node'), 'a node name of 1 to 64 letters, digits, ".", "_" or "-"', node)
  const syncIntervalMs = c.duration(t, 'sync_interval', p, d.syncIntervalMs, 10)
  if (syncIntervalMs > 10_000) c.problem(join(p, 'sync_interval'), 'a duration of at most "10s"', t.sync_interval)
  const maxWaitMs = c.duration(t, 'max_wait', p, d.maxWaitMs, 1)
  if (maxWaitMs > 5000) c.problem(join(p, 'max_wait'), 'a duration of at most "5s"', t.max_wait)
  const nodeTtlMs = c.duration(t, 'node_ttl', p, d.nodeTtlMs, 300)
  if (nodeTtlMs < 2 * syncIntervalMs) c.problem(join(p, 'node_ttl'), `a duration of at least twice sync_interval (${2 * syncIntervalMs}ms)`, t.node_ttl)
  const fall = c.int(t, 'fall', p, d.fall, 1, 100)
  const rise = c.int(t, 'rise', p, d.rise, 1, 100)
  return { url, username, password, passwordFile, caFile, prefix, node, syncIntervalMs, maxWaitMs, nodeTtlMs, insecure, sentinel, fall, rise }
}

/** password / password_file (with `prefix`: sentinel_password / sentinel_password_file), one or neither. */
function checkPassword (c: Checker, t: Table, p: string, baseDir: string, prefix: string, whose: string): { password: string, passwordFile: string } {
  const password = c.string(t, `${prefix}password`, p, '')
  const file = c.string(t, `${prefix}password_file`, p, '')
  if (password !== '' && file !== '') c.problems.push(`${join(p, `${prefix}password`)}: set ${prefix}password or ${prefix}password_file, not both`)
  const passwordFile = file === '' ? '' : resolvePath(baseDir, file)
  if (passwordFile !== '' && !readable(passwordFile)) c.problem(join(p, `${prefix}password_file`), `a readable file holding the ${whose} password`, passwordFile)
  return { password, passwordFile }
}

/** sentinels = ["redis://host:port", ...] (one scheme for all) and master_name. */
function checkSentinel (c: Checker, t: Table, p: string, baseDir: string, insecure: boolean): SentinelConf {
  const list = c.strings(t, 'sentinels', p, [])
  if (list.length === 0) c.problem(join(p, 'sentinels'), 'a non-empty array of Sentinel addresses like "redis://host:26379" or "rediss://host:26379" (TLS)', t.sentinels)
  const endpoints: Array<{ host: string, port: number }> = []
  const schemes = new Set<string>()
  list.forEach((s, i) => {
    const path = join(join(p, 'sentinels'), i)
    if (!/^rediss?:\/\/[^/]*\/?$/.test(s)) {
      c.problem(path, SENTINEL_EXPECTED + ' (no database, no path)', redact(s))
      return
    }
    if (!checkUrl(c, path, s, insecure, SENTINEL_EXPECTED)) return
    const u = new URL(s)
    schemes.add(u.protocol)
    endpoints.push({ host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port === '' ? 26379 : Number(u.port) })
  })
  if (schemes.size > 1) c.problems.push(`${join(p, 'sentinels')}: every sentinel with one scheme (all redis:// or all rediss://)`)
  const masterName = c.string(t, 'master_name', p)
  if (masterName !== '' && !NAME.test(masterName)) c.problem(join(p, 'master_name'), 'the master\'s name in the sentinels\' configuration: 1 to 64 letters, digits, ".", "_" or "-"', masterName)
  const username = c.string(t, 'sentinel_username', p, '')
  const { password, passwordFile } = checkPassword(c, t, p, baseDir, 'sentinel_', 'Sentinel')
  return { endpoints, masterName, tls: schemes.has('rediss:'), username, password, passwordFile }
}

/** What logs and `show cluster` name as the Redis: the URL (password redacted), or the sentinels and the master's name. */
export function redisLabel (conf: ClusterConf): string {
  const s = conf.sentinel
  if (s === null) return redact(conf.url)
  return `sentinel ${s.masterName} via ${s.endpoints.map((e) => `${e.host.includes(':') ? `[${e.host}]` : e.host}:${e.port}`).join(',')}`
}

function readable (path: string): boolean {
  try {
    accessSync(path, constants.R_OK)
    return true
  } catch {
    return false
  }
}

/**
 * The URL's scheme, host and port; a password inside the URL is refused (it
 * would end up in logs and process lists). True when it holds.
 */
function checkUrl (c: Checker, path: string, url: string, insecure: boolean, expected = URL_EXPECTED): boolean {
  if (url === '') return false
  if (url.startsWith('unix:') && expected === URL_EXPECTED) {
    if (!url.slice(5).startsWith('/')) c.problem(path, URL_EXPECTED + ' (an absolute socket path)', url)
    return true
  }
  let u: URL
  try {
    u = new URL(url)
  } catch {
    c.problem(path, expected, redact(url))
    return false
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    c.problem(path, expected, redact(url))
    return false
  }
  if (u.password !== '') {
    c.problems.push(`${path}: a password inside the URL is refused (it would show in logs); use password_file or password`)
    return false
  }
  if (u.hostname === '') c.problem(path, expected + ' (with a host)', url)
  if (u.pathname !== '' && u.pathname !== '/' && !/^\/\d{1,2}$/.test(u.pathname)) c.problem(path, expected + ' (a database number as path, like /0)', url)
  const host = u.hostname.replace(/^\[|\]$/g, '')
  if (u.protocol === 'redis:' && !insecure && !isLoopbackHost(host)) {
    c.problems.push(`${path}: ${host} is not a loopback address and redis:// is plain text; use rediss:// (TLS), or set cluster.insecure = true on a trusted network`)
    return false
  }
  return true
}

/** A URL with any password replaced, for messages and logs. */
export function redact (url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:/@]*:)[^@]*@/i, '$1***@')
}
