// Why a server takes no requests, in words, read from its shared state: the
// text of a 503 "no server available" answer (worker) and of the health-check
// log lines (control plane), so both say the same thing:
//   web1 127.0.0.1:9001: GET /health → 404, 3 of 3 checks failed
// Runs only on those rare paths; it allocates freely.
import { constants } from 'node:os'
import type { HealthCheckConf, ServerConf } from '../config/dynamic.js'
import {
  ADMIN_STATES, CHECK_STATUS, CHECK_UP, S_ADMIN, S_CHECK, S_CHECK_CODE, S_CHECK_ERRNO, S_CHECK_STATUS, S_DOWN_UNTIL,
  S_STREAK, S_WEIGHT, serverBase,
} from './layout.js'

const ERRNO_NAMES = new Map(Object.entries(constants.errno).map(([name, n]) => [n, name]))
const ERRNO_WORDS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOENT: 'no such socket',
  EACCES: 'permission denied',
}

/** The errno number of a node error's `code` (0 when it has none), for S_CHECK_ERRNO. */
export function errnoOf (err: unknown): number {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' ? (constants.errno as Record<string, number>)[code] ?? 0 : 0
}

/** HealthCheckResponse.ServingStatus by number */
const SERVING_STATUS = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN']

/** A gRPC check's S_CHECK_CODE in words: a ServingStatus (0-3), minus a grpc-status, or an HTTP status (core/control/grpc-check.ts). */
function grpcAnswer (code: number): string {
  if (code < 0) return `grpc-status ${-code}`
  if (code >= 100) return `HTTP ${code}`
  return SERVING_STATUS[code] ?? `status ${code}`
}

/** What the last check did and saw: "GET /health → 404", "GET /health: connection refused", "connect: no answer within 1000ms". */
export function lastCheck (i32: Int32Array, slot: number, hc: HealthCheckConf): string {
  const b = serverBase(slot)
  const status = CHECK_STATUS[Atomics.load(i32, b + S_CHECK_STATUS)] ?? 'UNK'
  const errno = Atomics.load(i32, b + S_CHECK_ERRNO)
  const name = ERRNO_NAMES.get(errno) ?? ''
  const err = errno === 0 ? '' : `: ${ERRNO_WORDS[name] ?? name}`
  const probe = hc.type === 'tcp' ? 'connect' : hc.type === 'grpc' ? `gRPC Health/Check(${JSON.stringify(hc.grpcService)})` : `GET ${hc.path}`
  const code = Atomics.load(i32, b + S_CHECK_CODE)
  switch (status) {
    case 'L7OK': case 'L7STS':
      if (hc.type === 'grpc') return `${probe} → ${grpcAnswer(code)}${status === 'L7STS' ? ' (expected SERVING)' : ''}`
      return `${probe} → ${code}${status === 'L7STS' ? ` (expected ${hc.status})` : ''}`
    case 'L4OK': return 'connect: accepted'
    case 'L4CON': return `${probe}${err === '' ? ': cannot connect' : err}`
    case 'L4TOUT': return `${probe}: no connection within ${hc.timeoutMs}ms`
    case 'L7TOUT': return `${probe}: no answer within ${hc.timeoutMs}ms`
    case 'L7RSP': return `${probe}: invalid answer${err}`
    default: return 'not checked yet'
  }
}

/** The last check and the streak against rise/fall: "GET /health → 404, 3 of 3 checks failed". */
export function checkVerdict (i32: Int32Array, slot: number, hc: HealthCheckConf): string {
  const streak = Atomics.load(i32, serverBase(slot) + S_STREAK)
  const n = Math.abs(streak)
  const of = streak < 0 ? hc.fall : hc.rise
  const count = n <= of ? `${n} of ${of}` : `${n}`
  return streak === 0 ? lastCheck(i32, slot, hc) : `${lastCheck(i32, slot, hc)}, ${count} checks ${streak < 0 ? 'failed' : 'passed'}${n > of ? ' in a row' : ''}`
}

/** Why this server takes no new requests now ('' when it does), prefixed with its name and address. */
export function whyUnusable (i32: Int32Array, slot: number, srv: ServerConf, hc: HealthCheckConf, now: number): string {
  const b = serverBase(slot)
  const who = `${srv.name} ${srv.address}`
  const admin = Atomics.load(i32, b + S_ADMIN)
  if (admin !== 0) return `${who}: admin state ${ADMIN_STATES[admin] ?? admin}`
  if (Atomics.load(i32, b + S_CHECK) !== CHECK_UP) return `${who}: DOWN, ${checkVerdict(i32, slot, hc)}`
  if (Atomics.load(i32, b + S_WEIGHT) === 0) return `${who}: weight 0`
  const until = Atomics.load(i32, b + S_DOWN_UNTIL)
  const left = (until - now) | 0
  if (until !== 0 && left > 0) {
    return `${who}: out for ${Math.ceil(left / 1000)}s more after ${srv.maxFails} failed requests within ${srv.failTimeoutMs / 1000}s (max_fails)`
  }
  return ''
}

/** The 503 "no server available" reason for a service: each unusable server's reason, "; " between. */
export function noServerReason (i32: Int32Array, servers: ReadonlyArray<{ readonly conf: ServerConf, readonly slot: number }>,
  hc: HealthCheckConf, now: number): string {
  if (servers.length === 0) return 'it has no servers'
  const why = servers.map((s) => whyUnusable(i32, s.slot, s.conf, hc, now)).filter((w) => w !== '')
  return why.length === 0 ? 'every server is busy with this request\'s failed attempts' : why.join('; ')
}
