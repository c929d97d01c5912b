// Per-request cost of [tracing] on the request path (core/worker/trace/): the
// span context at the start (ids, sampling, the traceparent for upstream) and
// the span's fields at the end, for a trace lb starts (sampled at 1 % or
// 100 %) and for a client's sampled traceparent; and, off the request path,
// encoding one span of a batch as OTLP JSON. The exporter is a stand-in that
// keeps nothing: what is timed is the request path's share.
import { DEFAULTS } from '../../core/config/defaults.js'
import type { TracingConf } from '../../core/config/tracing.js'
import type { SpanExporter } from '../../core/worker/trace/exporter.js'
import { exportRequest } from '../../core/worker/trace/otlp-json.js'
import type { Span } from '../../core/worker/trace/span.js'
import { Tracer } from '../../core/worker/trace/tracer.js'
import { browserCtx, resetCtx } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

const conf = (sampleRate: number): TracingConf => ({
  ...DEFAULTS.tracing, sampleRate, resourceAttributes: {}, headers: {},
})

export async function run (): Promise<Result[]> {
  let last: Span | null = null
  const exporter = { push: (s: Span) => { last = s } } as unknown as SpanExporter
  const services = new Map()
  const tracers = { one: new Tracer(conf(0.01), exporter, services), all: new Tracer(conf(1), exporter, services) }
  const ctx = browserCtx()
  const withParent = browserCtx()
  withParent.headers.push('traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'tracestate', 'congo=t61rcWkgMzE')
  const request = (t: Tracer, c: typeof ctx): void => {
    resetCtx(c)
    c.trace = null
    c.status = 200
    t.start(c)
    t.end(c, 1.5)
  }
  const batch: Span[] = []
  request(tracers.all, ctx)
  for (let i = 0; i < 512; i++) batch.push(last!)
  const result = await runSuite('tracing', {
    'start + end, new trace, sample_rate 0.01': () => request(tracers.one, ctx),
    'start + end, new trace, sample_rate 1': () => request(tracers.all, ctx),
    'start + end, client\'s sampled traceparent and tracestate': () => request(tracers.one, withParent),
    'OTLP JSON of a 512-span batch (export, off the request path)': () => { if (exportRequest({ serviceName: 'lb', attributes: {} }, batch).length === 0) throw new Error('empty') },
  })
  return result
}

if (isMain(import.meta.url)) await run()
