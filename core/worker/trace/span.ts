// One request's span: made at the request's start when tracing is on (its ids
// and sampling decision: the traceparent forwarded upstream), completed at its
// end from the same fields the access log writes, then queued for export when
// sampled. One fixed shape, every field set here.

export class Span {
  /** 32 lower-case hex */
  traceId = ''
  /** lb's span, 16 lower-case hex: the parent-id of the traceparent sent upstream */
  spanId = ''
  /** the client's span ('' for a trace lb started) */
  parentSpanId = ''
  /** recorded and exported; either way the traceparent goes upstream with this flag */
  sampled = false
  /** the client's tracestate, bounded (trace-context.ts), '' when none */
  traceState = ''
  // --- set at the end (Tracer.end), for sampled spans only
  /** wall clock, microseconds since the epoch (below 2^53: exact in a double) */
  startUs = 0
  endUs = 0
  method = ''
  path = ''
  scheme = ''
  /** the request's host (server.address of a SERVER span) */
  host = ''
  /** "1.1", "1.0" or "2" */
  protocolVersion = ''
  status = 0
  clientAddress = ''
  userAgent = ''
  entrypoint = ''
  router = ''
  service = ''
  server = ''
  /** the upstream server's address, '' when none was picked */
  serverAddress = ''
  /** lb's error code of an answer it made itself (core/errors.ts), '' otherwise */
  errorCode = ''
}
