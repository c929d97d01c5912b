// [tracing]: OpenTelemetry traces, Traefik v3's `tracing` section in lb's snake
// case. The section being there turns tracing on (Traefik: `[tracing]`); a
// reload (SIGHUP, the config API) may add, change or remove it: each worker's
// next generation traces, or stops tracing, the requests it accepts from then
// on (core/worker/trace/). Spans go to one OTLP/HTTP collector as JSON
// (`[tracing.otlp.http]`); Traefik's `[tracing.otlp.grpc]` is refused by name.
// lb's own keys bound what a worker holds when the collector is away.
import { type Checker, type Table, HEADER_NAME, join } from './check.js'
import { DEFAULTS } from './defaults.js'

export interface TracingConf {
  /** the service.name resource attribute */
  readonly serviceName: string
  /** share of new traces recorded, 0..1 (parent-based: a valid traceparent's sampled flag decides for its trace) */
  readonly sampleRate: number
  /** more resource attributes (Traefik's resourceAttributes) */
  readonly resourceAttributes: Readonly<Record<string, string>>
  /** the collector's URL, http: or https: */
  readonly endpoint: string
  /** headers of every export request (an API key, say): never logged */
  readonly headers: Readonly<Record<string, string>>
  /** spans a worker holds for export at most; more are dropped and counted */
  readonly maxQueueSpans: number
  /** spans per export request */
  readonly batchSize: number
  readonly flushIntervalMs: number
  readonly exportTimeoutMs: number
}

const KEYS = ['service_name', 'sample_rate', 'resource_attributes', 'otlp', 'max_queue_spans', 'batch_size', 'flush_interval', 'export_timeout']

/** [tracing], or null when the section is absent (tracing off). */
export function checkTracing (c: Checker, raw: unknown): TracingConf | null {
  if (raw === undefined) return null
  const p = 'tracing'
  const t = c.table(raw, p, KEYS)
  const d = DEFAULTS.tracing
  const otlpPath = join(p, 'otlp')
  const otlp = c.table(t.otlp, otlpPath, ['http', 'grpc'])
  if (otlp.grpc !== undefined) c.problems.push(`${join(otlpPath, 'grpc')}: OTLP over gRPC is not supported by lb; use [tracing.otlp.http] (OTLP/HTTP, JSON)`)
  const hp = join(otlpPath, 'http')
  const http = c.table(otlp.http, hp, ['endpoint', 'headers'])
  const endpoint = c.string(http, 'endpoint', hp, d.endpoint)
  checkEndpoint(c, join(hp, 'endpoint'), endpoint)
  const maxQueueSpans = c.int(t, 'max_queue_spans', p, d.maxQueueSpans, 1, 1_000_000)
  const batchSize = c.int(t, 'batch_size', p, d.batchSize, 1, 100_000)
  if (batchSize > maxQueueSpans) c.problem(join(p, 'batch_size'), `at most max_queue_spans (${maxQueueSpans})`, batchSize)
  return {
    serviceName: c.string(t, 'service_name', p, d.serviceName),
    sampleRate: c.number(t, 'sample_rate', p, d.sampleRate, 0, 1),
    resourceAttributes: stringTable(c, t, 'resource_attributes', p, false),
    endpoint,
    headers: stringTable(c, http, 'headers', hp, true),
    maxQueueSpans,
    batchSize,
    flushIntervalMs: c.duration(t, 'flush_interval', p, d.flushIntervalMs, 10, 3_600_000),
    exportTimeoutMs: c.duration(t, 'export_timeout', p, d.exportTimeoutMs, 10, 600_000),
  }
}

function checkEndpoint (c: Checker, path: string, endpoint: string): void {
  let u: URL
  try {
    u = new URL(endpoint)
  } catch {
    c.problem(path, 'a URL like "http://collector:4318/v1/traces"', endpoint)
    return
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') c.problem(path, 'an http:// or https:// URL', endpoint)
  else if (u.username !== '' || u.password !== '') c.problem(path, 'a URL without user:password@ (put credentials in [tracing.otlp.http.headers])', '(a URL with credentials)')
}

/** A table of string values; `headers`: the keys are header names, the values never shown in a message. */
function stringTable (c: Checker, t: Table, key: string, path: string, headers: boolean): Record<string, string> {
  const tp = join(path, key)
  const raw = c.table(t[key], tp, null)
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v !== 'string') {
      if (headers) c.problems.push(`${join(tp, k)}: expected a string (the value is not shown: it may be a credential)`)
      else c.problem(join(tp, k), 'a string', v)
    } else if (headers && !HEADER_NAME.test(k)) c.problem(join(tp, k), 'a header name (letters, digits and !#$%&\'*+.^_`|~-)', k)
    else if (headers && /[\r\n\0]/.test(v)) c.problems.push(`${join(tp, k)}: expected a header value without CR, LF or NUL`)
    else out[headers ? k.toLowerCase() : k] = v
  }
  return out
}
