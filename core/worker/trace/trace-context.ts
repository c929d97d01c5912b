// W3C Trace Context level 1 (https://www.w3.org/TR/trace-context/): the
// traceparent and tracestate request headers, read strictly and written for
// the request lb forwards. traceparent is "00-<32 hex trace id>-<16 hex parent
// id>-<2 hex flags>", lower-case hex, neither id all zeros: anything else (an
// other version, upper case, a longer value, two traceparent fields) is not a
// parent, and lb starts a new trace, as OpenTelemetry's propagator does. The
// tracestate is kept as received (its fields joined with ","), cut by whole
// entries to TRACESTATE_MAX characters, and only with a valid traceparent.
import { randomFillSync } from 'node:crypto'

/** traceparent's length in version 00 */
export const TRACEPARENT_LENGTH = 55
/** tracestate characters kept at most: the 512 the spec asks every vendor to propagate */
export const TRACESTATE_MAX = 512

const ZERO_TRACE = '0'.repeat(32)
const ZERO_SPAN = '0'.repeat(16)

/** Lower-case hex only (a-f, 0-9) from `from` to `to`. */
function isHex (s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i)
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false
  }
  return true
}

/** Whether `v` is a valid version-00 traceparent. */
export function validTraceparent (v: string): boolean {
  return v.length === TRACEPARENT_LENGTH && v.charCodeAt(0) === 48 && v.charCodeAt(1) === 48 &&
    v.charCodeAt(2) === 45 && v.charCodeAt(35) === 45 && v.charCodeAt(52) === 45 &&
    isHex(v, 3, 35) && isHex(v, 36, 52) && isHex(v, 53, 55) &&
    v.slice(3, 35) !== ZERO_TRACE && v.slice(36, 52) !== ZERO_SPAN
}

/** The sampled flag (bit 0 of trace-flags) of a valid traceparent. */
export function sampledFlag (v: string): boolean {
  return (parseInt(v.slice(53, 55), 16) & 1) === 1
}

/** A tracestate of at most TRACESTATE_MAX characters: whole list members are dropped from the end (the spec's truncation). */
export function boundTracestate (v: string): string {
  if (v.length <= TRACESTATE_MAX) return v
  const cut = v.lastIndexOf(',', TRACESTATE_MAX)
  return cut <= 0 ? '' : boundTracestate(v.slice(0, cut))
}

export function formatTraceparent (traceId: string, spanId: string, sampled: boolean): string {
  return '00-' + traceId + '-' + spanId + (sampled ? '-01' : '-00')
}

// Random ids from a pool refilled 4 KiB at a time: one getrandom() per 170
// spans rather than per id. An all-zero id has odds 2^-64 and is re-drawn.
const POOL = Buffer.alloc(4096)
let used = POOL.length

function randomHex (bytes: number, zero: string): string {
  for (;;) {
    if (used + bytes > POOL.length) {
      randomFillSync(POOL)
      used = 0
    }
    const s = POOL.toString('hex', used, used + bytes)
    used += bytes
    if (s !== zero) return s
  }
}

export function newTraceId (): string {
  return randomHex(16, ZERO_TRACE)
}

export function newSpanId (): string {
  return randomHex(8, ZERO_SPAN)
}
