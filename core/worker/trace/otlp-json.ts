// A batch of spans as an OTLP/HTTP request body: the JSON mapping of
// ExportTraceServiceRequest (opentelemetry-proto, "JSON Protobuf Encoding"):
// trace and span ids as hex strings (not base64), 64-bit integers (times in
// ns, intValue) as decimal strings, enums as numbers, camelCase field names.
// Attribute names follow the OpenTelemetry HTTP semantic conventions for a
// SERVER span; lb.* ones name lb's router, service and server.
import type { Span } from './span.js'

const SPAN_KIND_SERVER = 2
const STATUS_ERROR = 2
/** semconv: methods outside this set are reported as "_OTHER" (the original in http.request.method_original) */
const KNOWN_METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE'])

interface KeyValue { key: string, value: { stringValue: string } | { intValue: string } }

const str = (key: string, v: string): KeyValue => ({ key, value: { stringValue: v } })
const int = (key: string, v: number): KeyValue => ({ key, value: { intValue: String(v) } })

/** µs since the epoch as the decimal string of ns */
const nanos = (us: number): string => us === 0 ? '0' : String(us) + '000'

export interface Resource {
  readonly serviceName: string
  readonly attributes: Readonly<Record<string, string>>
}

/** The span's name: "{method} {router}" (semconv's "{method} {http.route}": the router is what lb routes by), or the method alone when no router matched. */
export function spanName (s: Span): string {
  const method = KNOWN_METHODS.has(s.method) ? s.method : 'HTTP'
  return s.router === '' ? method : method + ' ' + s.router
}

function attributes (s: Span): KeyValue[] {
  const known = KNOWN_METHODS.has(s.method)
  const a: KeyValue[] = [
    str('http.request.method', known ? s.method : '_OTHER'),
    str('url.path', s.path),
    str('url.scheme', s.scheme),
    str('network.protocol.name', 'http'),
    str('network.protocol.version', s.protocolVersion),
    str('client.address', s.clientAddress),
    str('lb.entrypoint', s.entrypoint),
  ]
  if (!known) a.push(str('http.request.method_original', s.method))
  if (s.host !== '') a.push(str('server.address', s.host))
  if (s.status !== 0) a.push(int('http.response.status_code', s.status))
  if (s.userAgent !== '') a.push(str('user_agent.original', s.userAgent))
  if (s.router !== '') a.push(str('lb.router', s.router))
  if (s.service !== '') a.push(str('lb.service', s.service))
  if (s.server !== '') a.push(str('lb.server', s.server))
  if (s.serverAddress !== '') a.push(str('lb.server.address', s.serverAddress))
  // semconv: on a SERVER span only 5xx is an error; error.type is lb's own code when lb answered, else the status
  if (s.status >= 500) a.push(str('error.type', s.errorCode !== '' ? s.errorCode : String(s.status)))
  if (s.errorCode !== '') a.push(str('lb.error.code', s.errorCode))
  return a
}

function spanJson (s: Span): object {
  return {
    traceId: s.traceId,
    spanId: s.spanId,
    ...(s.parentSpanId === '' ? {} : { parentSpanId: s.parentSpanId }),
    ...(s.traceState === '' ? {} : { traceState: s.traceState }),
    name: spanName(s),
    kind: SPAN_KIND_SERVER,
    startTimeUnixNano: nanos(s.startUs),
    endTimeUnixNano: nanos(s.endUs),
    attributes: attributes(s),
    status: s.status >= 500 ? { code: STATUS_ERROR } : {},
  }
}

export function exportRequest (resource: Resource, spans: readonly Span[]): string {
  const attrs = [str('service.name', resource.serviceName)]
  for (const [k, v] of Object.entries(resource.attributes)) if (k !== 'service.name') attrs.push(str(k, v))
  return JSON.stringify({
    resourceSpans: [{
      resource: { attributes: attrs },
      scopeSpans: [{ scope: { name: 'lb' }, spans: spans.map(spanJson) }],
    }],
  })
}
