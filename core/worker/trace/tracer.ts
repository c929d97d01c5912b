// Tracing in one generation of a worker's data plane (null there when [tracing]
// is absent: the request path then pays one null check at start and one at the
// end, and the request is forwarded exactly as without tracing).
//
// start(): the request's span context. A valid traceparent (trace-context.ts)
// makes lb's span its child and its sampled flag decides (parent-based
// sampling, OpenTelemetry's default and Traefik's); otherwise lb starts a
// trace, sampled with probability sample_rate. Either way the request goes
// upstream (HTTP/1.1, h2/gRPC, WebSocket: they all forward ctx.upstreamHeaders
// and leave out ctx.dropHeaders) with lb's traceparent, whose parent-id is
// lb's span and whose flag says whether it was sampled (00: the backend may
// still trace, as an OpenTelemetry SDK's unsampled span propagates), plus the
// client's tracestate; the client's own fields are not forwarded.
// end(): from DataPlane.finish, with what the access log writes: a sampled
// span is completed and queued (exporter.ts).
import { performance } from 'node:perf_hooks'
import type { TracingConf } from '../../config/tracing.js'
import type { Ctx } from '../request/context.js'
import type { ServiceRuntime } from '../runtime.js'
import type { SpanExporter } from './exporter.js'
import { Span } from './span.js'
import { boundTracestate, formatTraceparent, newSpanId, newTraceId, sampledFlag, validTraceparent } from './trace-context.js'

/** the client's trace fields, never forwarded as sent (ctx.dropHeaders) */
const TRACE_HEADERS: readonly string[] = ['traceparent', 'tracestate']
/** performance.now() + ORIGIN_MS = wall-clock ms */
const ORIGIN_MS = performance.timeOrigin

export class Tracer {
  readonly #rate: number
  readonly #exporter: SpanExporter
  readonly #services: ReadonlyMap<string, ServiceRuntime>

  constructor (conf: TracingConf, exporter: SpanExporter, services: ReadonlyMap<string, ServiceRuntime>) {
    this.#rate = conf.sampleRate
    this.#exporter = exporter
    this.#services = services
  }

  start (ctx: Ctx): void {
    const h = ctx.headers
    let parent = ''
    let parents = 0
    let state = ''
    for (let i = 0; i < h.length; i += 2) {
      const k = h[i]!
      if (k.length !== 10 && k.length !== 11) continue
      if (k === 'traceparent') {
        parent = h[i + 1]!
        parents++
      } else if (k === 'tracestate') state = state === '' ? h[i + 1]! : state + ',' + h[i + 1]!
    }
    const s = new Span()
    if (parents === 1 && validTraceparent(parent)) {
      s.traceId = parent.slice(3, 35)
      s.parentSpanId = parent.slice(36, 52)
      s.sampled = sampledFlag(parent)
      s.traceState = boundTracestate(state.trim())
    } else {
      s.traceId = newTraceId()
      s.sampled = this.#rate >= 1 || (this.#rate > 0 && Math.random() < this.#rate)
    }
    s.spanId = newSpanId()
    ctx.trace = s
    const up = s.traceState === ''
      ? ['traceparent', formatTraceparent(s.traceId, s.spanId, s.sampled)]
      : ['traceparent', formatTraceparent(s.traceId, s.spanId, s.sampled), 'tracestate', s.traceState]
    ctx.upstreamHeaders = ctx.upstreamHeaders === null ? up : ctx.upstreamHeaders.concat(up)
    ctx.dropHeaders = ctx.dropHeaders === null ? TRACE_HEADERS as string[] : ctx.dropHeaders.concat(TRACE_HEADERS)
  }

  /** `ms`: the request's duration, as DataPlane.finish measured it. */
  end (ctx: Ctx, ms: number): void {
    const s = ctx.trace!
    if (!s.sampled) return
    s.startUs = Math.round((ORIGIN_MS + ctx.t0) * 1000)
    s.endUs = s.startUs + Math.round(ms * 1000)
    s.method = ctx.method
    s.path = ctx.path
    s.scheme = ctx.proto
    s.host = ctx.host
    s.protocolVersion = ctx.h2 ? '2' : ctx.http10 ? '1.0' : '1.1'
    s.status = ctx.status
    s.clientAddress = ctx.remoteAddress
    s.userAgent = ctx.header('user-agent')
    s.entrypoint = ctx.entrypoint
    s.router = ctx.router
    s.service = ctx.service
    s.server = ctx.server
    if (ctx.server !== '') {
      for (const srv of this.#services.get(ctx.service)?.servers ?? []) {
        if (srv.conf.name === ctx.server) s.serverAddress = srv.conf.address
      }
    }
    s.errorCode = ctx.errorCode
    this.#exporter.push(s)
  }
}
