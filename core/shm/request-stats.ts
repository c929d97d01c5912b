// Per-request accounting for /metrics, in the request rows and time blocks of
// core/shm/layout.ts. The hot side (recordRequest) is a handful of adds to the
// calling worker's own stripe; the read side sums stripes at scrape time.
import {
  type Shm, C_CT_SUM, C_RT_SUM, C_TIMED, C_TT_SUM, GLOBAL_COUNTERS, SRV_COUNTERS, TIME_SAMPLES, G_AUTH_REFUSED, G_RATE_LIMITED, MAX_ENTRYPOINTS, MAX_ROUTERS, REQ_CODES, REQ_GRPC_BASE, REQ_GRPC_CODES, REQ_METHODS, REQ_ROW,
  REQ_ROWS_BASE, STRIPE_WORDS, TIME_BLOCK, TIME_BLOCKS_BASE, TIME_BUCKETS_S, T_BYTES_IN, T_BYTES_OUT, T_HEAD_IN, T_HEAD_OUT, T_SUM, G_BYTES_OUT, EP_COUNTERS, EP_GRPC_1XX, G_EP, statusClass,
} from './layout.js'

const NC = REQ_CODES.length

/** status code → index in REQ_CODES, precomputed so the hot path does one array read */
const CODE_INDEX = new Uint8Array(1000)
for (let code = 0; code < 1000; code++) {
  const exact = REQ_CODES.indexOf(String(code) as typeof REQ_CODES[number])
  const cls = code >= 100 && code < 600 ? REQ_CODES.indexOf(`${(code / 100) | 0}xx` as typeof REQ_CODES[number]) : -1
  CODE_INDEX[code] = exact >= 0 ? exact : cls >= 0 ? cls : NC - 1
}

const BUCKETS_MS = TIME_BUCKETS_S.map((s) => s * 1000)

export function methodIndex (m: string): number {
  switch (m) {
    case 'GET': return 0
    case 'HEAD': return 1
    case 'POST': return 2
    case 'PUT': return 3
    case 'DELETE': return 4
    case 'PATCH': return 5
    case 'OPTIONS': return 6
    default: return 7
  }
}

export function codeIndex (status: number): number {
  return status >= 0 && status < 1000 ? CODE_INDEX[status]! : NC - 1
}

/** Row index of an entry point (0..MAX_ENTRYPOINTS-1) or router slot, in the rows/blocks of a stripe. */
export const epRow = (ep: number): number => ep
export const routerRow = (slot: number): number => MAX_ENTRYPOINTS + slot

/**
 * Counts one finished request in `stripe` (the caller's own): entry point row,
 * router row (routerSlot -1 = unrouted), duration bucket and sum, bytes; and
 * middleware refusals (a 429 or 401/403 a middleware answered itself).
 * `grpcStatus` >= 0: a gRPC call, counted in the row's gRPC cells by that
 * status (above 16: as 2 UNKNOWN), and by the class of `status` in the entry
 * point's EP_GRPC_1XX counters; -1 (every HTTP/1.1 request): by method and code.
 */
export function recordRequest (f64: Float64Array, stripeBase: number, ep: number, routerSlot: number, method: string,
  status: number, grpcStatus: number, ms: number, bytesIn: number, bytesOut: number, byMiddleware: boolean): void {
  const cell = grpcStatus < 0 ? methodIndex(method) * NC + codeIndex(status) : REQ_GRPC_BASE + (grpcStatus < REQ_GRPC_CODES ? grpcStatus : 2)
  let bucket = 0
  while (bucket < BUCKETS_MS.length && ms > BUCKETS_MS[bucket]!) bucket++
  const secs = ms / 1000
  if (ep >= 0 && ep < MAX_ENTRYPOINTS) {
    const row = stripeBase + REQ_ROWS_BASE + epRow(ep) * REQ_ROW
    f64[row + cell]! += 1
    if (grpcStatus >= 0) f64[stripeBase + G_EP + ep * EP_COUNTERS + EP_GRPC_1XX + statusClass(status)]! += 1
    const t = stripeBase + TIME_BLOCKS_BASE + epRow(ep) * TIME_BLOCK
    f64[t + bucket]! += 1
    f64[t + T_SUM]! += secs
    f64[t + T_BYTES_IN]! += bytesIn
    f64[t + T_BYTES_OUT]! += bytesOut
  }
  if (routerSlot >= 0) {
    f64[stripeBase + REQ_ROWS_BASE + routerRow(routerSlot) * REQ_ROW + cell]! += 1
    const t = stripeBase + TIME_BLOCKS_BASE + routerRow(routerSlot) * TIME_BLOCK
    f64[t + bucket]! += 1
    f64[t + T_SUM]! += secs
    f64[t + T_BYTES_IN]! += bytesIn
    f64[t + T_BYTES_OUT]! += bytesOut
  }
  if (byMiddleware) {
    if (status === 429) f64[stripeBase + G_RATE_LIMITED]! += 1
    else if (status === 401 || status === 403) f64[stripeBase + G_AUTH_REFUSED]! += 1
  }
}

/** Sum over stripes of one request row: REQ_ROW counters, index method * REQ_CODES.length + code. */
export function sumRequestRow (shm: Shm, row: number): Float64Array {
  const out = new Float64Array(REQ_ROW)
  for (let w = 0; w <= shm.workers; w++) {
    const b = w * STRIPE_WORDS + REQ_ROWS_BASE + row * REQ_ROW
    for (let i = 0; i < REQ_ROW; i++) out[i]! += shm.f64[b + i]!
  }
  return out
}

/** REQ_CODES index → HAProxy's response class: 0 (1xx) to 4 (5xx), 5 (hrsp_other: a status outside 100-599) */
const CODE_CLASS = REQ_CODES.map((c) => c === 'other' ? 5 : Number(c[0]) - 1)

/**
 * Entry point `ep`'s responses by class, summed over stripes: hrsp_1xx..hrsp_5xx,
 * hrsp_other of its `show stat` FRONTEND row. Read from its request row, so the
 * request path counts nothing more for it (but a gRPC call's class, EP_GRPC_1XX).
 */
export function responseClasses (shm: Shm, ep: number): number[] {
  const row = sumRequestRow(shm, epRow(ep))
  const out = [0, 0, 0, 0, 0, 0]
  for (let m = 0; m < REQ_METHODS.length; m++) {
    for (let c = 0; c < NC; c++) out[CODE_CLASS[c]!]! += row[m * NC + c]!
  }
  for (let w = 0; w <= shm.workers; w++) {
    for (let k = 0; k < 5; k++) out[k]! += shm.f64[w * STRIPE_WORDS + G_EP + ep * EP_COUNTERS + EP_GRPC_1XX + k]!
  }
  return out
}

/** Sum over stripes of one time block (buckets non-cumulative, then sum, bytes in, bytes out). */
export function sumTimeBlock (shm: Shm, row: number): Float64Array {
  const out = new Float64Array(TIME_BLOCK)
  for (let w = 0; w <= shm.workers; w++) {
    const b = w * STRIPE_WORDS + TIME_BLOCKS_BASE + row * TIME_BLOCK
    for (let i = 0; i < TIME_BLOCK; i++) out[i]! += shm.f64[b + i]!
  }
  return out
}

/** Zeroes a router slot's rows in every stripe (the slot is being given to a new router). */
export function clearRouterStats (shm: Shm, slot: number): void {
  if (slot < 0 || slot >= MAX_ROUTERS) return
  for (let w = 0; w <= shm.workers; w++) {
    const r = w * STRIPE_WORDS + REQ_ROWS_BASE + routerRow(slot) * REQ_ROW
    shm.f64.fill(0, r, r + REQ_ROW)
    const t = w * STRIPE_WORDS + TIME_BLOCKS_BASE + routerRow(slot) * TIME_BLOCK
    shm.f64.fill(0, t, t + TIME_BLOCK)
  }
}

export { REQ_METHODS, REQ_CODES, REQ_GRPC_BASE, REQ_GRPC_CODES }

/**
 * Adds one answered request's times (ms) to server `slot`'s sliding sums in
 * the caller's stripe (HAProxy swrate_add over TIME_SAMPLES): a few adds, no
 * allocation. `connectMs` is 0 when a kept-alive connection was reused.
 */
export function recordServerTimes (f64: Float64Array, stripeBase: number, slot: number, connectMs: number, responseMs: number, totalMs: number): void {
  const b = stripeBase + GLOBAL_COUNTERS + slot * SRV_COUNTERS
  f64[b + C_CT_SUM] = f64[b + C_CT_SUM]! - f64[b + C_CT_SUM]! / TIME_SAMPLES + connectMs
  f64[b + C_RT_SUM] = f64[b + C_RT_SUM]! - f64[b + C_RT_SUM]! / TIME_SAMPLES + responseMs
  f64[b + C_TT_SUM] = f64[b + C_TT_SUM]! - f64[b + C_TT_SUM]! / TIME_SAMPLES + totalMs
  f64[b + C_TIMED]! += 1
}

export interface ServerTimes { readonly ctime: number, readonly rtime: number, readonly ttime: number, readonly samples: number }

/** Average connect, response and total times (ms) over about the last TIME_SAMPLES requests of each thread, and their weight. */
export function serverTimes (shm: Shm, slot: number): ServerTimes {
  let ct = 0
  let rt = 0
  let tt = 0
  let n = 0
  for (let w = 0; w <= shm.workers; w++) {
    const b = w * STRIPE_WORDS + GLOBAL_COUNTERS + slot * SRV_COUNTERS
    ct += shm.f64[b + C_CT_SUM]!
    rt += shm.f64[b + C_RT_SUM]!
    tt += shm.f64[b + C_TT_SUM]!
    n += Math.min(shm.f64[b + C_TIMED]!, TIME_SAMPLES)
  }
  return n === 0 ? { ctime: 0, rtime: 0, ttime: 0, samples: 0 } : { ctime: ct / n, rtime: rt / n, ttime: tt / n, samples: n }
}

/**
 * Counts a request head's size on entry point `ep` (T_HEAD_IN): the HTTP/1.1
 * request line, one "name: value" line per header and the blank line. Header
 * text is ASCII but for rare values, so string lengths are sizes; a loop of
 * adds over the headers already copied, no allocation.
 */
export function recordHeadIn (f64: Float64Array, stripeBase: number, ep: number, method: string, path: string, query: string, headers: readonly string[]): void {
  if (ep < 0 || ep >= MAX_ENTRYPOINTS) return
  // "METHOD SP path[?query] SP HTTP/1.1 CRLF" ... CRLF: 1 + 9 + 2 + 2 bytes around method, path and query
  let n = method.length + path.length + (query === '' ? 0 : query.length + 1) + 14
  for (let i = 0; i < headers.length; i += 2) n += headers[i]!.length + headers[i + 1]!.length + 4
  f64[stripeBase + TIME_BLOCKS_BASE + epRow(ep) * TIME_BLOCK + T_HEAD_IN]! += n
}

/**
 * Counts bytes sent to the clients of entry point `ep` outside the bodies of
 * counted requests (T_HEAD_OUT and G_BYTES_OUT): response heads as written,
 * chunk framing, the answers of the entry point's health location.
 */
export function recordSent (f64: Float64Array, stripeBase: number, ep: number, n: number): void {
  if (ep < 0 || ep >= MAX_ENTRYPOINTS) return
  f64[stripeBase + G_BYTES_OUT]! += n
  f64[stripeBase + TIME_BLOCKS_BASE + epRow(ep) * TIME_BLOCK + T_HEAD_OUT]! += n
}
