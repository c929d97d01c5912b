// A worker's OTLP/HTTP span exporter. Each worker exports its own spans: they
// never cross postMessage (a structured clone per batch on both threads), the
// control plane's loop stays free for health checks and the admin surfaces,
// and each worker's memory bound is its own. The request path only pushes a
// finished span into a bounded queue (span-queue.ts); the export runs later on
// the worker's loop: every flush_interval, or soon after batch_size spans are
// waiting, one request at a time.
//
// When the collector is down, slow or refuses: a failed batch (network error,
// export_timeout, 429, 502, 503, 504: OTLP's retryable answers) is kept and
// sent again after a back-off doubling from BACKOFF_MIN_MS to BACKOFF_MAX_MS,
// while new spans wait in the queue; once it is full they are dropped and
// counted (lb_tracing_spans_dropped_total). Memory is thus at most
// max_queue_spans + batch_size spans. Any other answer drops the batch (it
// would be refused again). One warning per outage, one info line when spans
// flow again; the configured headers (credentials) are never logged.
import type { TracingConf } from '../../config/tracing.js'
import type { Logger } from '../../log.js'
import type { Stripe } from '../../shm/counters.js'
import { G_TRACE_DROPPED, G_TRACE_EXPORTED } from '../../shm/layout.js'
import { post } from '../../net/http-post.js'
import { exportRequest } from './otlp-json.js'
import type { Span } from './span.js'
import { SpanQueue } from './span-queue.js'

const BACKOFF_MIN_MS = 1_000
const BACKOFF_MAX_MS = 30_000
const RETRYABLE = new Set([429, 502, 503, 504])

export class SpanExporter {
  readonly #stripe: Stripe
  readonly #log: Logger
  #conf: TracingConf | null = null
  /** the settings exports go out under: the last non-null #conf (a reload that turns tracing off sends what is queued once more) */
  #sendConf: TracingConf | null = null
  #queue: SpanQueue | null = null
  #interval: NodeJS.Timeout | null = null
  /** a flush is due soon (a full batch is waiting); set once per batch, not per span */
  #soon = false
  /** the export request under way */
  #sending: Promise<void> | null = null
  /** a batch that failed and is sent again first */
  #retry: Span[] | null = null
  #backoffMs = 0
  #retryTimer: NodeJS.Timeout | null = null
  /** the collector failed since the last success: warned once */
  #down = false
  #droppedInOutage = 0
  readonly #flushSoon = (): void => { this.#soon = false; this.flush() }

  constructor (stripe: Stripe, log: Logger) {
    this.#stripe = stripe
    this.#log = log
  }

  /** A generation's [tracing] (null: off). Spans already queued leave with the settings they are sent under. */
  configure (conf: TracingConf | null): void {
    const prev = this.#conf
    this.#conf = conf
    if (conf !== null) this.#sendConf = conf
    if (conf === null) {
      if (this.#interval !== null) clearInterval(this.#interval)
      this.#interval = null
      if (prev !== null) this.flush() // what is queued leaves once; a failure drops it (tracing is off)
      return
    }
    if (this.#queue === null) this.#queue = new SpanQueue(conf.maxQueueSpans)
    else this.#drop(this.#queue.resize(conf.maxQueueSpans))
    if (prev === null || prev.flushIntervalMs !== conf.flushIntervalMs) {
      if (this.#interval !== null) clearInterval(this.#interval)
      this.#interval = setInterval(() => this.flush(), conf.flushIntervalMs)
      this.#interval.unref()
    }
  }

  /** A finished, sampled span (the request path: no allocation, never waits). */
  push (s: Span): void {
    const q = this.#queue
    if (q === null || !q.push(s)) {
      this.#drop(1)
      return
    }
    // a span of a request that began before a reload turned tracing off leaves at once (no timer runs then)
    if (!this.#soon && q.size >= (this.#conf?.batchSize ?? 1) && this.#sending === null) {
      this.#soon = true
      setImmediate(this.#flushSoon)
    }
  }

  /** Starts one export when none is under way and no back-off is pending. */
  flush (): void {
    if (this.#sending !== null || this.#retryTimer !== null) return
    const batch = this.#retry ?? this.#queue?.take(this.#conf?.batchSize ?? Infinity) ?? []
    this.#retry = null
    if (batch.length === 0) return
    this.#sending = this.#send(batch).finally(() => {
      this.#sending = null
      if ((this.#queue?.size ?? 0) >= (this.#conf?.batchSize ?? 1)) this.flush()
    })
  }

  /**
   * Exports what is queued, for at most `ms` (SIGTERM: the worker exits after
   * this); what is left is counted dropped.
   */
  async shutdown (ms: number): Promise<void> {
    if (this.#interval !== null) clearInterval(this.#interval)
    this.#interval = null
    if (this.#retryTimer !== null) clearTimeout(this.#retryTimer)
    this.#retryTimer = null
    const deadline = Date.now() + ms
    const drain = async (): Promise<void> => {
      for (;;) {
        if (this.#sending !== null) await this.#sending
        if (Date.now() >= deadline) return
        this.flush()
        if (this.#sending === null) return
        if (this.#retry !== null && this.#retryTimer !== null) return // the collector failed: no waiting for a back-off
      }
    }
    let timer: NodeJS.Timeout | undefined
    await Promise.race([drain(), new Promise<void>((resolve) => { timer = setTimeout(resolve, Math.max(0, deadline - Date.now())) })])
    clearTimeout(timer)
    this.#drop((this.#queue?.size ?? 0) + (this.#retry?.length ?? 0))
  }

  #drop (n: number): void {
    if (n === 0) return
    this.#stripe.add(G_TRACE_DROPPED, n)
    if (this.#down) this.#droppedInOutage += n
  }

  async #send (batch: Span[]): Promise<void> {
    const conf = this.#sendConf
    if (conf === null) {
      this.#drop(batch.length)
      return
    }
    const body = exportRequest({ serviceName: conf.serviceName, attributes: conf.resourceAttributes }, batch)
    const r = await post(new URL(conf.endpoint), conf.headers, 'application/json', body, conf.exportTimeoutMs)
    if (r.status >= 200 && r.status < 300) {
      this.#stripe.add(G_TRACE_EXPORTED, batch.length)
      this.#backoffMs = 0
      if (this.#down) {
        this.#log.info('tracing: the collector accepts spans again', { endpoint: conf.endpoint, dropped: this.#droppedInOutage })
        this.#down = false
        this.#droppedInOutage = 0
      }
      return
    }
    // a network error, a time-out, and OTLP's retryable statuses are tried again; any other answer would be the same again
    const retry = (r.status === 0 || RETRYABLE.has(r.status)) && this.#conf !== null
    if (!this.#down) {
      this.#down = true
      const reason = r.status === 0 ? (r.error.startsWith('no answer within') ? `${r.error} (export_timeout)` : r.error) : `HTTP ${r.status}`
      this.#log.warn('tracing: the collector does not take spans', {
        endpoint: conf.endpoint, reason, spans: retry ? 'kept (bounded) and sent again with back-off' : 'dropped (counted)',
      })
    }
    if (!retry) {
      this.#drop(batch.length)
      return
    }
    this.#retry = batch
    this.#backoffMs = Math.min(BACKOFF_MAX_MS, this.#backoffMs === 0 ? BACKOFF_MIN_MS : this.#backoffMs * 2)
    this.#retryTimer = setTimeout(() => { this.#retryTimer = null; this.flush() }, this.#backoffMs)
    this.#retryTimer.unref()
  }
}
