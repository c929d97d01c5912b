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
}

const KEYS = ['url', 'username', 'password', 'password_file', 'ca_file', 'prefix', 'node', 'sync_interval', 'max_wait', 'node_ttl', 'insecure']
const URL_EXPECTED = 'a Redis URL: "redis://host:port", "rediss://host:port" (TLS) or "unix:/path/to/redis.sock"'
const NAME = /^[A-Za-z0-9._-]{1,64}$/

export function checkCluster (c: Checker, raw: unknown, baseDir: string): ClusterConf | null {
  if (raw === undefined) return null
  const p = 'cluster'
  const d = DEFAULTS.cluster
  const t: Table = c.table(raw, p, KEYS)
  const url = c.string(t, 'url', p)
  const insecure = c.bool(t, 'insecure', p, d.insecure)
  checkUrl(c, join(p, 'url'), url, insecure)
  const username = c.string(t, 'username', p, '')
  const password = c.string(t, 'password', p, '')
  const file = c.string(t, 'password_file', p, '')
  if (password !== '' && file !== '') c.problems.push(`${join(p, 'password')}: set password or password_file, not both`)
  const passwordFile = file === '' ? '' : resolvePath(baseDir, file)
  if (passwordFile !== '' && !readable(passwordFile)) c.problem(join(p, 'password_file'), 'a readable file holding the Redis password', passwordFile)
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
  return { url, username, password, passwordFile, caFile, prefix, node, syncIntervalMs, maxWaitMs, nodeTtlMs, insecure }
}

function readable (path: string): boolean {
  try {
    accessSync(path, constants.R_OK)
    return true
  } catch {
    return false
  }
}

/** The URL's scheme, host and port; a password inside the URL is refused (it would end up in logs and process lists). */
function checkUrl (c: Checker, path: string, url: string, insecure: boolean): void {
  if (url === '') return
  if (url.startsWith('unix:')) {
    if (!url.slice(5).startsWith('/')) c.problem(path, URL_EXPECTED + ' (an absolute socket path)', url)
    return
  }
  let u: URL
  try {
    u = new URL(url)
  } catch {
    c.problem(path, URL_EXPECTED, redact(url))
    return
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    c.problem(path, URL_EXPECTED, redact(url))
    return
  }
  if (u.password !== '') {
    c.problems.push(`${path}: a password inside the URL is refused (it would show in logs); use password_file or password`)
    return
  }
  if (u.hostname === '') c.problem(path, URL_EXPECTED + ' (with a host)', url)
  if (u.pathname !== '' && u.pathname !== '/' && !/^\/\d{1,2}$/.test(u.pathname)) c.problem(path, URL_EXPECTED + ' (a database number as path, like /0)', url)
  const host = u.hostname.replace(/^\[|\]$/g, '')
  if (u.protocol === 'redis:' && !insecure && !isLoopbackHost(host)) {
    c.problems.push(`${path}: ${host} is not a loopback address and redis:// is plain text; use rediss:// (TLS), or set cluster.insecure = true on a trusted network`)
  }
}

/** A URL with any password replaced, for messages and logs. */
export function redact (url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:/@]*:)[^@]*@/i, '$1***@')
}
