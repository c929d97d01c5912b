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

// The body is written as text rather than built as objects for JSON.stringify:
// a 512-span batch is ~0.5 MB, and the objects (about 40 a span) were most of
// the export's cost on the worker's loop. Every string value goes through
// JSON.stringify (escaping); names are constants.
const str = (key: string, v: string): string => ',{"key":"' + key + '","value":{"stringValue":' + JSON.stringify(v) + '}}'
const int = (key: string, v: number): string => ',{"key":"' + key + '","value":{"intValue":"' + String(v) + '"}}'

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

/** The span's attributes, as the text of a JSON array. */
function attributes (s: Span): string {
  const known = KNOWN_METHODS.has(s.method)
  let a = str('http.request.method', known ? s.method : '_OTHER') +
    str('url.path', s.path) +
    str('url.scheme', s.scheme) +
    str('network.protocol.name', 'http') +
    str('network.protocol.version', s.protocolVersion) +
    str('client.address', s.clientAddress) +
    str('lb.entrypoint', s.entrypoint)
  if (!known) a += str('http.request.method_original', s.method)
  if (s.host !== '') a += str('server.address', s.host)
  if (s.status !== 0) a += int('http.response.status_code', s.status)
  if (s.userAgent !== '') a += str('user_agent.original', s.userAgent)
  if (s.router !== '') a += str('lb.router', s.router)
  if (s.service !== '') a += str('lb.service', s.service)
  if (s.server !== '') a += str('lb.server', s.server)
  if (s.serverAddress !== '') a += str('lb.server.address', s.serverAddress)
  // semconv: on a SERVER span only 5xx is an error; error.type is lb's own code when lb answered, else the status
  if (s.status >= 500) a += str('error.type', s.errorCode !== '' ? s.errorCode : String(s.status))
  if (s.errorCode !== '') a += str('lb.error.code', s.errorCode)
  return '[' + a.slice(1) + ']'
}

/** One span as JSON text; ids are lower-case hex (checked on the way in, or made by lb): no escaping needed. */
function spanJson (s: Span): string {
  return '{"traceId":"' + s.traceId + '","spanId":"' + s.spanId + '"' +
    (s.parentSpanId === '' ? '' : ',"parentSpanId":"' + s.parentSpanId + '"') +
    (s.traceState === '' ? '' : ',"traceState":' + JSON.stringify(s.traceState)) +
    ',"name":' + JSON.stringify(spanName(s)) + ',"kind":' + SPAN_KIND_SERVER +
    ',"startTimeUnixNano":"' + nanos(s.startUs) + '","endTimeUnixNano":"' + nanos(s.endUs) + '"' +
    ',"attributes":' + attributes(s) +
    ',"status":' + (s.status >= 500 ? '{"code":' + STATUS_ERROR + '}' : '{}') + '}'
}

export function exportRequest (resource: Resource, spans: readonly Span[]): string {
  let attrs = str('service.name', resource.serviceName)
  // keys from the config: escaped like the values
  for (const [k, v] of Object.entries(resource.attributes)) if (k !== 'service.name') attrs += ',{"key":' + JSON.stringify(k) + ',"value":{"stringValue":' + JSON.stringify(v) + '}}'
  let body = ''
  for (let i = 0; i < spans.length; i++) body += (i === 0 ? '' : ',') + spanJson(spans[i]!)
  return '{"resourceSpans":[{"resource":{"attributes":[' + attrs.slice(1) + ']},"scopeSpans":[{"scope":{"name":"lb"},"spans":[' + body + ']}]}]}'
}
