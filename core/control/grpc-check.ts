// The gRPC health checking protocol (grpc/grpc doc/health-checking.md), for
// health_check.type = "grpc": a unary call to grpc.health.v1.Health/Check with
// HealthCheckRequest { string service = 1 }, answered by HealthCheckResponse
// { ServingStatus status = 1 } where SERVING = 1. The messages are one field
// each, so they are encoded and decoded here by hand rather than with a
// protobuf library. The call goes over node:http2 through
// core/upstream/h2-pool.ts (h2Once), a new session per check.
import type { HealthCheckConf, ServerConf } from '../config/dynamic.js'
import type { CHECK_STATUS } from '../shm/layout.js'
import { H2OnceError, type H2Tls, h2Once } from '../upstream/h2-pool.js'

export const HEALTH_CHECK_METHOD = '/grpc.health.v1.Health/Check'
/** HealthCheckResponse.ServingStatus SERVING (UNKNOWN 0, NOT_SERVING 2, SERVICE_UNKNOWN 3 fail the check) */
const SERVING = 1
const DEADLINE_EXCEEDED = '4' // grpc-status, as it comes in the trailer

export interface GrpcCheckResult {
  readonly status: typeof CHECK_STATUS[number]
  /**
   * S_CHECK_CODE: the ServingStatus (0-3) when the call succeeded, minus the
   * grpc-status (-1 to -16) when it failed, the HTTP :status (>= 100) when the
   * answer was not HTTP 200 (core/shm/server-why.ts says which in words)
   */
  readonly code: number
  readonly err: unknown
}

/** HealthCheckRequest in a gRPC message frame: flag 0 (uncompressed), uint32 length, then field 1 (tag 0x0a) as length-delimited bytes. */
export function checkRequest (service: string): Buffer {
  const s = Buffer.from(service)
  const len: number[] = []
  for (let n = s.length; ; n >>>= 7) { // varint: 7 bits a byte, low first
    if (n < 0x80) { len.push(n); break }
    len.push((n & 0x7f) | 0x80)
  }
  const msg = s.length === 0 ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0x0a, ...len]), s]) // proto3 leaves out an empty string
  const frame = Buffer.alloc(5)
  frame.writeUInt32BE(msg.length, 1)
  return Buffer.concat([frame, msg])
}

/** The `status` of a framed HealthCheckResponse (0 when absent: proto3's default), or -1 when the bytes are not one. */
export function servingStatus (body: Buffer): number {
  if (body.length < 5 || body[0] !== 0 || body.readUInt32BE(1) !== body.length - 5) return -1
  let status = 0
  let i = 5
  const varint = (): number => {
    let v = 0
    for (let shift = 0; i < body.length && shift < 35; shift += 7) {
      const b = body[i++]!
      v += (b & 0x7f) * 2 ** shift
      if (b < 0x80) return v
    }
    return -1
  }
  while (i < body.length) {
    const tag = varint()
    if (tag < 0) return -1
    const wire = tag & 7
    if (wire === 0) { // varint
      const v = varint()
      if (v < 0) return -1
      if (tag >>> 3 === 1) status = v
    } else if (wire === 2) { // length-delimited: a field a newer server may add
      const n = varint()
      if (n < 0 || i + n > body.length) return -1
      i += n
    } else if (wire === 1 || wire === 5) i += wire === 1 ? 8 : 4
    else return -1
  }
  return i === body.length ? status : -1
}

/** One check of `srv` (over TLS when `tls` is set: protocol = "h2"); resolves (never rejects) with the HAProxy-style outcome. */
export async function grpcCheck (srv: ServerConf, hc: HealthCheckConf, tls: H2Tls, signal: AbortSignal): Promise<GrpcCheckResult> {
  const headers = {
    ':method': 'POST',
    ':path': HEALTH_CHECK_METHOD,
    ':scheme': tls === null ? 'http' : 'https',
    ':authority': srv.path === '' ? srv.address : 'localhost',
    'content-type': 'application/grpc',
    te: 'trailers',
    'user-agent': 'lb-health-check',
    'grpc-timeout': `${hc.timeoutMs}m`, // so the server gives up when lb does
  }
  try {
    const r = await h2Once(srv, tls, headers, checkRequest(hc.grpcService), hc.timeoutMs, signal)
    if (r.status !== 200) return { status: 'L7STS', code: r.status, err: null }
    // a Trailers-Only answer (an error, usually) carries grpc-status in its headers
    const gs = r.trailers['grpc-status'] ?? r.headers['grpc-status']
    if (gs === undefined || !/^\d{1,2}$/.test(gs)) return { status: 'L7RSP', code: 0, err: null }
    // DEADLINE_EXCEEDED: the server gave up at the grpc-timeout lb sent, a race
    // with lb's own timer for the same moment; either way the check timed out
    if (gs === DEADLINE_EXCEEDED) return { status: 'L7TOUT', code: 0, err: null }
    if (gs !== '0') return { status: 'L7STS', code: -Number(gs), err: null }
    const s = servingStatus(r.body)
    if (s < 0) return { status: 'L7RSP', code: 0, err: null }
    return { status: s === SERVING ? 'L7OK' : 'L7STS', code: s, err: null }
  } catch (e) {
    const err = e instanceof H2OnceError ? e : new H2OnceError(false, false, e)
    if (err.timedOut) return { status: err.connected ? 'L7TOUT' : 'L4TOUT', code: 0, err: null }
    return { status: err.connected ? 'L7RSP' : 'L4CON', code: 0, err: err.reason }
  }
}
