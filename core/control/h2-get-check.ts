// health_check.type = "http" on a service whose servers speak HTTP/2 only
// (protocol = "h2c" or "h2"): GET `path` over HTTP/2, expecting `status`. An
// HTTP/1.1 GET would fail on every such server and take them all DOWN; gRPC
// servers usually answer nothing at /health either, so such services mostly
// want type = "grpc", but an HTTP/2 server with a health page gets the check
// it was configured with.
import type { HealthCheckConf, ServerConf } from '../config/dynamic.js'
import { H2OnceError, type H2Tls, h2Once } from '../upstream/h2-pool.js'
import type { GrpcCheckResult } from './grpc-check.js'

/** One check of `srv`; resolves (never rejects) with the HAProxy-style outcome: code = the HTTP status. */
export async function h2GetCheck (srv: ServerConf, hc: HealthCheckConf, tls: H2Tls, signal: AbortSignal): Promise<GrpcCheckResult> {
  const headers = {
    ':method': 'GET',
    ':path': hc.path,
    ':scheme': tls === null ? 'http' : 'https',
    ':authority': srv.path === '' ? srv.address : 'localhost',
    'user-agent': 'lb-health-check',
  }
  try {
    const r = await h2Once(srv, tls, headers, Buffer.alloc(0), hc.timeoutMs, signal)
    return { status: r.status === hc.status ? 'L7OK' : 'L7STS', code: r.status, err: null }
  } catch (e) {
    const err = e instanceof H2OnceError ? e : new H2OnceError(false, false, e)
    if (err.timedOut) return { status: err.connected ? 'L7TOUT' : 'L4TOUT', code: 0, err: null }
    return { status: err.connected ? 'L7RSP' : 'L4CON', code: 0, err: err.reason }
  }
}
