// The one Redis connection of a node (ioredis, loaded only with [cluster]).
// Every command is bounded: no offline queue (a command while disconnected
// fails at once), commandTimeout = max_wait, no retries per request; the
// connection itself reconnects by itself with a capped back-off. The password
// is read here (inline or from password_file) and goes nowhere but the AUTH
// command: it is never logged, and errors are reported by the callers with
// the redacted URL only.
//
// With [cluster] sentinels, ioredis asks the sentinels for the master of
// master_name at every (re)connect, checks that the node it reached is the
// master (ROLE), and listens for +switch-master on the sentinels
// (failoverDetector), so a failover moves the connection to the new master
// without a restart; a master demoted while lb was connected answers writes
// with READONLY, which reconnects (to whatever the sentinels name now).
import { readFileSync } from 'node:fs'
import type { Redis, RedisOptions } from 'ioredis'
import type { ClusterConf } from '../config/cluster.js'

export type { Redis } from 'ioredis'

/** Longest pause between two reconnect attempts, ms. */
const RECONNECT_MAX_MS = 1000
/** A TCP or TLS connect that takes longer than this is abandoned and retried, ms. */
const CONNECT_TIMEOUT_MS = 2000

/** The ioredis options for `conf`: address (or sentinels), TLS, ACL user and the bounds above. */
export function redisOptions (conf: ClusterConf, connectionName: string): RedisOptions {
  const password = secret(conf.password, conf.passwordFile)
  const opts: RedisOptions = {
    connectionName,
    commandTimeout: conf.maxWaitMs,
    connectTimeout: CONNECT_TIMEOUT_MS,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    lazyConnect: true,
    retryStrategy: (times) => Math.min(RECONNECT_MAX_MS, 50 * times),
  }
  if (conf.username !== '') opts.username = conf.username
  if (password !== '') opts.password = password
  const ca = conf.caFile !== '' ? { ca: readFileSync(conf.caFile) } : {}
  const s = conf.sentinel
  if (s !== null) {
    opts.sentinels = s.endpoints.map((e) => ({ host: e.host, port: e.port }))
    opts.name = s.masterName
    opts.role = 'master'
    opts.failoverDetector = true
    // the sentinels are asked with the same bound as any command, and asked again as often as the master is
    opts.sentinelCommandTimeout = conf.maxWaitMs
    opts.sentinelRetryStrategy = (times) => Math.min(RECONNECT_MAX_MS, 50 * times)
    opts.reconnectOnError = (err) => err.message.startsWith('READONLY')
    if (s.username !== '') opts.sentinelUsername = s.username
    const sp = secret(s.password, s.passwordFile)
    if (sp !== '') opts.sentinelPassword = sp
    if (s.tls) {
      opts.tls = { ...ca }
      opts.sentinelTLS = { ...ca }
      opts.enableTLSForSentinelMode = true
    }
    return opts
  }
  if (conf.url.startsWith('unix:')) {
    opts.path = conf.url.slice(5)
    return opts
  }
  const u = new URL(conf.url)
  opts.host = u.hostname.replace(/^\[|\]$/g, '')
  opts.port = u.port === '' ? 6379 : Number(u.port)
  if (/^\/\d+$/.test(u.pathname)) opts.db = Number(u.pathname.slice(1))
  if (u.protocol === 'rediss:') opts.tls = { servername: opts.host, ...ca }
  return opts
}

/** An inline password, or the first line of its file (read at each connect set-up, never kept in the config's logs). */
function secret (inline: string, file: string): string {
  return file !== '' ? readFileSync(file, 'utf8').trim() : inline
}

/** host:port of the Redis a connection is connected to now ('' when none): with Sentinel, the master of the moment. */
export function connectedTo (redis: Redis): string {
  const s = redis.stream as { remoteAddress?: string, remotePort?: number } | undefined
  if (redis.status !== 'ready' || s?.remoteAddress === undefined) return ''
  return s.remoteAddress.includes(':') ? `[${s.remoteAddress}]:${s.remotePort ?? ''}` : `${s.remoteAddress}:${s.remotePort ?? ''}`
}

/** A connection to the cluster's Redis, connecting in the background: a node starts while Redis is down. */
export async function openRedis (conf: ClusterConf, connectionName: string, watch: (r: Redis) => void): Promise<Redis> {
  const { Redis } = await import('ioredis')
  const redis = new Redis(redisOptions(conf, connectionName))
  watch(redis) // before connecting: the first connection's error is the one that explains the first failure
  endOnAuthRefusal(redis)
  // failures surface as failed commands, which the cluster reports once per change of health
  redis.on('error', () => {})
  // the first outcome of connecting (ready, or refused) is awaited, bounded, so that the first
  // commands do not report a connection that was merely still being made
  await new Promise<void>((resolve) => {
    const done = (): void => { clearTimeout(timer); redis.off('ready', done); redis.off('error', done); resolve() }
    const timer = setTimeout(done, CONNECT_TIMEOUT_MS)
    redis.once('ready', done)
    redis.once('error', done)
    redis.connect().catch(() => {})
  })
  return redis
}

/**
 * ioredis goes on after a refused AUTH, as Redis's default user when that one
 * is enabled: a node must never act under another identity than configured, so
 * such a connection ends for good (the credentials are read at start: fix them
 * and restart). Every connection of a node gets this, duplicates included.
 */
export function endOnAuthRefusal (redis: Redis): void {
  redis.on('error', (err: Error) => {
    if (/^(WRONGPASS|NOPERM)|invalid (username-)?password/i.test(err.message)) redis.disconnect(false)
  })
}
