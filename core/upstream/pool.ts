// Keep-alive connections to one upstream server, per worker. `keepalive` is the
// number of IDLE connections kept (nginx `keepalive`, HAProxy `pool-max-conn`),
// not a cap: a request that finds no idle connection opens a new one at once,
// so requests never queue behind a pool limit.
//
// Idle connections above `keepalive` are not closed the moment they are
// released: under high concurrency a burst of responses ending in one loop turn
// would otherwise close connections that the next requests reopen (the churn
// measured for nginx with keepalive 32). The surplus is closed by the sweeper
// once it has stayed idle SURPLUS_IDLE_MS (HAProxy purges idle connections
// progressively in the same spirit, pool-purge-delay).
import type { ServerConf } from '../config/dynamic.js'
import { now } from '../clock.js'
import { IndexedSet } from '../indexed-set.js'
import { type ConnectionOwner, type Exchange, UpstreamConnection } from './connection.js'

export interface PoolOptions {
  readonly maxIdle: number
  readonly connectTimeoutMs: number
  readonly serverTimeoutMs: number
  readonly keepAliveMs: number
  /** TLS to the server (ConnectionOwner.secure); false when not given */
  readonly secure?: boolean
}

const SWEEP_MS = 250
const SURPLUS_IDLE_MS = 1_000
const pools = new Set<ServerPool>()
let sweeper: NodeJS.Timeout | null = null

export class ServerPool implements ConnectionOwner {
  readonly server: ServerConf
  readonly maxIdle: number
  readonly connectTimeoutMs: number
  readonly serverTimeoutMs: number
  readonly keepAliveMs: number
  readonly secure: boolean
  readonly #idle: UpstreamConnection[] = []
  /** connections bound to an exchange */
  readonly #busy = new IndexedSet<UpstreamConnection>()
  #closing = false

  constructor (server: ServerConf, opts: PoolOptions) {
    this.server = server
    this.maxIdle = opts.maxIdle
    this.connectTimeoutMs = opts.connectTimeoutMs
    this.serverTimeoutMs = opts.serverTimeoutMs
    this.keepAliveMs = opts.keepAliveMs
    this.secure = opts.secure ?? false
    pools.add(this)
    if (sweeper === null) {
      sweeper = setInterval(sweepAll, SWEEP_MS)
      sweeper.unref()
    }
  }

  /**
   * Binds `ex` to an idle connection (most recently used first, so surplus ones
   * age out) or a new one. Calls ex.onConnected when the connection is ready:
   * synchronously for an idle connection.
   */
  acquire (ex: Exchange, isHead: boolean): UpstreamConnection {
    const t = now()
    let conn = this.#idle.pop()
    while (conn !== undefined && conn.closed) conn = this.#idle.pop()
    if (conn !== undefined) {
      this.#busy.add(conn)
      conn.assign(ex, isHead, t + this.serverTimeoutMs)
      ex.onConnected(conn)
      return conn
    }
    conn = new UpstreamConnection(this)
    this.#busy.add(conn)
    conn.assign(ex, isHead, t + this.connectTimeoutMs)
    return conn
  }

  release (conn: UpstreamConnection): void {
    this.#busy.delete(conn)
    if (this.#closing || this.maxIdle === 0) {
      conn.destroy()
      return
    }
    conn.deadline = now() + this.keepAliveMs
    this.#idle.push(conn)
  }

  /** The connection closed or was destroyed: drop every reference to it. */
  forget (conn: UpstreamConnection): void {
    if (this.#busy.delete(conn)) return
    const i = this.#idle.indexOf(conn)
    if (i >= 0) this.#idle.splice(i, 1)
  }

  /** Closes idle connections now and busy ones when their exchange ends (config reload, shutdown). */
  close (): void {
    this.#closing = true
    for (const c of this.#idle.splice(0)) c.destroy()
    pools.delete(this)
    if (this.#busy.size > 0) pools.add(this) // keep sweeping time-outs until the last exchange ends
  }

  sweep (t: number): void {
    const busy = this.#busy.items
    for (let i = busy.length - 1; i >= 0; i--) {
      const c = busy[i]! // expire() removes c: walking down keeps the unvisited part in place
      if (((t - c.deadline) | 0) > 0) c.expire('LB_ERR_UPSTREAM_TIMEOUT')
    }
    const idle = this.#idle // oldest first
    while (idle.length > 0 && ((t - idle[0]!.deadline) | 0) > 0) idle[0]!.destroy()
    // surplus over `keepalive` that has been idle a while: close, oldest first
    const surplusBefore = t - SURPLUS_IDLE_MS + this.keepAliveMs
    while (idle.length > this.maxIdle && ((surplusBefore - idle[0]!.deadline) | 0) > 0) idle[0]!.destroy()
    if (this.#closing && this.#busy.size === 0) pools.delete(this)
  }
}

function sweepAll (): void {
  const t = now()
  for (const p of pools) p.sweep(t)
}
