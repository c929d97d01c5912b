// The control plane's once-a-second look at the shared-memory counters: the
// per-second rates and their peaks that HAProxy keeps (rate, rate_max,
// req_rate, req_rate_max, ConnRate, MaxConnRate, SslRate, MaxSslRate,
// SslBackendKeyRate, SslBackendMaxKeyRate, BytesOutRate), what HAProxy
// derives from state over time (smax of servers and backends, lastsess,
// downtime) and a history of the last HISTORY_SECONDS seconds for the
// dashboard page, so a page opened during an incident shows what led to it.
// Nothing here runs per request: the data plane only adds to its counters,
// this reads them.
//
// Resolution is one second: a rate is the count of the last whole second (as
// HAProxy's freq_ctr over one period), a server's or backend's smax is the peak
// of the in-flight count seen at the samples (a FRONTEND's is exact: shared
// memory keeps it), and lastsess/downtime have one-second granularity.
import {
  C_CONN_ERR, C_INFLIGHT, C_RESP_1XX, C_RESP_ERR, C_SELECTED, EP_ACCEPTS, G_ACCEPTS, G_BYTES_OUT, G_REQUESTS, G_RESP_1XX, G_SSL_BACKEND_KEYS,
  H_CONN_ACTIVE, T_SUM, TIME_BUCKETS_S,
} from '../shm/layout.js'
import { sumEntryPoint, sumGlobal, sumServer } from '../shm/counters.js'
import { epRow, sumTimeBlock } from '../shm/request-stats.js'
import type { AdminCore } from './core.js'
import { serverView } from './server-view.js'

export const HISTORY_SECONDS = 900
export const SAMPLE_MS = 1_000

/** A counter's rate over the last sample, its peak, and the last value read. */
export class Rate {
  last = -1
  cur = 0
  max = 0
  /** feeds the counter's current total; `secs` = time since the previous sample */
  feed (total: number, secs: number): void {
    if (this.last >= 0 && secs > 0) {
      this.cur = Math.max(0, Math.round((total - this.last) / secs))
      if (this.cur > this.max) this.max = this.cur
    }
    this.last = total
  }
}

export interface ServerSample {
  /** sessions (picks) per second, and the peak */
  readonly rate: Rate
  /** HTTP errors answered by the server (5xx) plus connect and response errors, per second */
  readonly errors: Rate
  /** peak in-flight count seen */
  smax: number
  /** ms epoch of the last sample where the pick count grew (0 = never) */
  lastSessAt: number
  /** ms spent not usable because DOWN (checks or passive marking) */
  downMs: number
}

/** an entry point's connections and requests per second */
export interface FrontendSample { readonly conn: Rate, readonly req: Rate }

export interface BackendSample { readonly rate: Rate, smax: number, lastSessAt: number, downMs: number, downs: number, wasUp: boolean }

/** The history columns, one value per second, oldest first. */
export const SERIES = ['requests', 'errors5xx', 'errors4xx', 'meanMs', 'p95Ms', 'connections', 'inflight'] as const
export type SeriesName = typeof SERIES[number]

export interface History {
  /** unix ms of the last point; points are SAMPLE_MS apart */
  readonly end: number
  readonly step: number
  readonly series: Record<SeriesName, number[]>
}

interface LatencyTotals { readonly count: number, readonly sum: number, readonly buckets: number[] }

/** Request classes and latency over every entry point. */
function latencyTotals (ctx: AdminCore): LatencyTotals {
  const n = ctx.config().entrypoints.length
  let count = 0
  let sum = 0
  const buckets = new Array<number>(TIME_BUCKETS_S.length + 1).fill(0)
  for (let i = 0; i < n; i++) {
    const b = sumTimeBlock(ctx.shm, epRow(i))
    for (let k = 0; k <= TIME_BUCKETS_S.length; k++) { buckets[k]! += b[k]!; count += b[k]! }
    sum += b[T_SUM]!
  }
  return { count, sum, buckets }
}

/** Upper bound (ms) of the bucket holding the 95th percentile of the requests between two totals. */
export function p95Ms (prev: LatencyTotals, cur: LatencyTotals): number {
  const total = cur.count - prev.count
  if (total <= 0) return 0
  let cum = 0
  for (let k = 0; k < cur.buckets.length; k++) {
    cum += cur.buckets[k]! - prev.buckets[k]!
    if (cum >= 0.95 * total) return (TIME_BUCKETS_S[Math.min(k, TIME_BUCKETS_S.length - 1)]!) * 1000
  }
  return 0
}

export class Sampler {
  readonly #ctx: AdminCore
  readonly servers = new Map<string, ServerSample>()
  readonly backends = new Map<string, BackendSample>()
  readonly frontends = new Map<string, FrontendSample>()
  readonly conn = new Rate()
  /** connections on the https entry points (HAProxy's SslRate: its TLS listeners' accepts) */
  readonly ssl = new Rate()
  /** full TLS handshakes with servers, per second (HAProxy's SslBackendKeyRate: keys computed on server connections) */
  readonly sslBackendKeys = new Rate()
  readonly req = new Rate()
  readonly bytesOut = new Rate()
  readonly #class = [new Rate(), new Rate(), new Rate(), new Rate(), new Rate()]
  /** percent of the last second the process's threads spent idle */
  idlePct = 100
  #cpu = process.cpuUsage()
  #at = 0
  #latency: LatencyTotals | null = null
  /** ring buffers of HISTORY_SECONDS points per series; #head = next write */
  readonly #ring = Object.fromEntries(SERIES.map((s) => [s, new Float64Array(HISTORY_SECONDS)])) as Record<SeriesName, Float64Array>
  #head = 0
  #filled = 0
  #timer: NodeJS.Timeout | null = null

  constructor (ctx: AdminCore) {
    this.#ctx = ctx
  }

  start (): void {
    this.tick(Date.now())
    this.#timer = setInterval(() => this.tick(Date.now()), SAMPLE_MS)
    this.#timer.unref()
  }

  stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  /** Reads every counter once; `now` in ms. */
  tick (now: number): void {
    const ctx = this.#ctx
    const shm = ctx.shm
    const config = ctx.config()
    const secs = this.#at === 0 ? 0 : (now - this.#at) / 1000
    const first = this.#at === 0
    const ms = first ? 0 : now - this.#at
    this.#at = now
    this.conn.feed(sumGlobal(shm, G_ACCEPTS), secs)
    this.req.feed(sumGlobal(shm, G_REQUESTS), secs)
    this.bytesOut.feed(sumGlobal(shm, G_BYTES_OUT), secs)
    this.sslBackendKeys.feed(sumGlobal(shm, G_SSL_BACKEND_KEYS), secs)
    this.#class.forEach((r, k) => r.feed(sumGlobal(shm, G_RESP_1XX + k), secs))
    const cpu = process.cpuUsage()
    if (secs > 0) {
      const busyUs = cpu.user - this.#cpu.user + cpu.system - this.#cpu.system
      const threads = shm.workers + 1
      this.idlePct = Math.max(0, Math.min(100, Math.round(100 - (100 * busyUs) / (secs * 1e6 * threads))))
    }
    this.#cpu = cpu
    const conns = Atomics.load(shm.i32, H_CONN_ACTIVE)
    let sslAccepts = 0
    config.entrypoints.forEach((ep, i) => {
      let f = this.frontends.get(ep.name)
      if (f === undefined) { f = { conn: new Rate(), req: new Rate() }; this.frontends.set(ep.name, f) }
      const block = sumTimeBlock(shm, epRow(i))
      let requests = 0
      for (let k = 0; k < T_SUM; k++) requests += block[k]!
      f.req.feed(requests, secs)
      const accepts = sumEntryPoint(shm, i, EP_ACCEPTS)
      f.conn.feed(accepts, secs)
      if (ep.tls !== null) sslAccepts += accepts
    })
    this.ssl.feed(sslAccepts, secs)
    let inflightAll = 0
    for (const svc of config.services) {
      if (svc.kind !== 'proxy') continue
      let b = this.backends.get(svc.name)
      if (b === undefined) { b = { rate: new Rate(), smax: 0, lastSessAt: 0, downMs: 0, downs: 0, wasUp: true }; this.backends.set(svc.name, b) }
      let picks = 0
      let inflight = 0
      let up = false
      for (const srv of svc.servers) {
        const key = `${svc.name}/${srv.name}`
        let s = this.servers.get(key)
        if (s === undefined) { s = { rate: new Rate(), errors: new Rate(), smax: 0, lastSessAt: 0, downMs: 0 }; this.servers.set(key, s) }
        const v = serverView(ctx, svc, srv)
        if (v.slot < 0) continue
        const selected = sumServer(shm, v.slot, C_SELECTED)
        if (s.rate.last >= 0 && selected > s.rate.last) s.lastSessAt = now
        s.rate.feed(selected, secs)
        s.errors.feed(sumServer(shm, v.slot, C_RESP_1XX + 4) + sumServer(shm, v.slot, C_CONN_ERR) + sumServer(shm, v.slot, C_RESP_ERR), secs)
        const cur = sumServer(shm, v.slot, C_INFLIGHT)
        s.smax = Math.max(s.smax, cur)
        if (!v.healthy) s.downMs += ms
        if (v.healthy && v.admin === 'ready' && v.weight > 0) up = true
        picks += selected
        inflight += cur
        b.lastSessAt = Math.max(b.lastSessAt, s.lastSessAt)
      }
      b.rate.feed(picks, secs)
      b.smax = Math.max(b.smax, inflight)
      if (!up) b.downMs += ms
      if (b.wasUp && !up) b.downs++
      b.wasUp = up
      inflightAll += inflight
    }
    const lat = latencyTotals(ctx)
    if (!first) {
      const prev = this.#latency!
      const n = lat.count - prev.count
      this.#push({
        requests: this.req.cur,
        errors5xx: this.#class[4]!.cur,
        errors4xx: this.#class[3]!.cur,
        meanMs: n > 0 ? (1000 * (lat.sum - prev.sum)) / n : 0,
        p95Ms: p95Ms(prev, lat),
        connections: conns,
        inflight: inflightAll,
      })
    }
    this.#latency = lat
  }

  #push (point: Record<SeriesName, number>): void {
    for (const s of SERIES) this.#ring[s][this.#head] = point[s]
    this.#head = (this.#head + 1) % HISTORY_SECONDS
    this.#filled = Math.min(HISTORY_SECONDS, this.#filled + 1)
  }

  /** The kept history, oldest first. */
  history (): History {
    const series = {} as Record<SeriesName, number[]>
    for (const s of SERIES) {
      const ring = this.#ring[s]
      const out: number[] = []
      for (let i = this.#filled; i > 0; i--) out.push(Math.round(ring[(this.#head - i + HISTORY_SECONDS) % HISTORY_SECONDS]! * 1000) / 1000)
      series[s] = out
    }
    return { end: this.#at, step: SAMPLE_MS, series }
  }
}
