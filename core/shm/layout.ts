// The layout of the one SharedArrayBuffer shared by the control plane and every
// data-plane worker (core/shm/buffer.ts allocates and attaches it). A change
// here changes the contract between threads: bump LAYOUT_VERSION. No objects
// or strings live here, only numbers.
//
//  ┌──────────────────────────────── Int32 words (i32) ────────────────────────────────────┐┌── Float64 words (f64) ──┐
//  │ HEADER │ SERVERS × SRV │ SERVICES × SVC │ RATE_SETS × RATE_SET │ RATE_ENTRIES × RN (names) ││ STRIPES × STRIPE_WORDS  │
//  │ [cluster region] │ REVOCATIONS │ MODEL_SLOTS │ HANDOFF_CELLS │ [budget locks and keys]      ││ [budget records]        │
//  └───────────────────────────────────────────────────────────────────────────────────────┘└─────────────────────────┘
//
//  one rate set (i32, RATE_SET_WORDS = 64 words = 4 cache lines of 64 bytes):
//  ┌─── line 0 ────────────┬──────┬─────────┬───────────────────────────────────────────────┐
//  │ KEY_A × 8 │ KEY_B × 8 │ LOCK │ 7 spare │ RATE_WAYS × data {EXPIRE, SEEN, TICK, A, B}   │
//  └───────────────────────┴──────┴─────────┴───────────────────────────────────────────────┘
//  The rate table (core/shm/rate-table.ts) is set-associative: a key lives in one set chosen by its
//  hash; the set's lock word serialises every read-modify-write of its entries across workers. The keys
//  of all ways share the first cache line (read-mostly: written only when a way changes hands).
//
//  one stripe (f64):
//  ┌────────┬────────────────────┬──────────────────────────┬──────────────────────────┐
//  │ GLOBAL │ SERVERS × SRV_C    │ (ENTRYPOINTS + ROUTERS)  │ (ENTRYPOINTS + ROUTERS)  │
//  │        │                    │   × REQ_ROW (method×code)│   × TIME_BLOCK (latency  │
//  │        │                    │                          │   buckets, sum, bytes)   │
//  └────────┴────────────────────┴──────────────────────────┴──────────────────────────┘
//
// The request rows and time blocks feed /metrics (by entry point and router, method and code; duration
// histograms; bytes) with no message per request: a worker adds to its own stripe, the scrape sums them.
//
// Int32 words are shared state written by several threads with Atomics
// (server health, balancing cursors). Float64 words are counters and gauges
// striped per thread: stripe w is written only by worker w (stripe `workers`
// by the control plane), with plain stores, and readers sum the stripes
// (HAProxy's per-thread counters). Float64 so counts never wrap.
//
// Time in the Int32 region is a wrapping millisecond tick (Date.now() | 0), compared with (a - b) | 0 as HAProxy does.

export const LAYOUT_VERSION = 16
export const MAGIC = 0x4c42_5348 // "LBSH"

/**
 * How many services, servers and routers the shared memory has room for,
 * chosen once at start from the configuration ([limits], core/config/capacity.ts)
 * and fixed for the life of the process: the regions below are sized by them.
 */
export interface Capacities {
  readonly services: number
  readonly servers: number
  readonly routers: number
}

// The capacities and the offsets that follow from them are module bindings,
// set by createShm (control plane) or attachShm (each worker, from the header)
// before anything reads them; `let` exports are live, so every importer sees
// the values set here. Defaults: the floor of `limits.* = "auto"`.
export let MAX_SERVERS = 1024
export let MAX_SERVICES = 256
export let MAX_ROUTERS = 256
export const MAX_ENTRYPOINTS = 16

// header words (i32)
export const H_MAGIC = 0
export const H_VERSION = 1
export const H_WORKERS = 2
export const H_FAULTS = 3 // control-plane exceptions caught and carried on from (core/control/faults.ts)
export const H_CONN_ACTIVE = 4 // client connections open now, all workers (Atomics +1/-1, core/worker/connections.ts)
export const H_BUDGET_KEYED = 5 // consumers with a generation key: budget records (0 = no [generation] keys), written by createShm
export const H_RELOADS = 6 // configuration reloads applied (SIGHUP), control plane
export const H_RELOAD_FAILS = 7 // reloads rejected (invalid file), control plane
export const H_LAST_RELOAD_OK = 8 // 1 when the last reload succeeded (1 before any)
export const H_LAST_RELOAD_SEC = 9 // unix seconds of the last reload attempt (0 = none)
export const H_CAP_SERVICES = 10 // Capacities, written by createShm, read by attachShm
export const H_CAP_SERVERS = 11
export const H_CAP_ROUTERS = 12
export const H_CLUSTER_SETS = 13 // sets of the cluster rate table (0 = no [cluster]), written by createShm
export const H_REVOKE_SETS = 14 // sets of the revocation table (limits.session_revocations ÷ REVOKE_WAYS), written by createShm
export const H_BUDGET_SETS = 15 // sets of the budget table of consumers without a key (0 = none have limits), written by createShm
// + ep * EC_WORDS: client connections per entry point (its index in the config), written only as one opens or closes
// (core/worker/connections.ts): `show stat` FRONTEND scur and smax, exact across workers
export const H_EP_CONNS = 16
export const EC_OPEN = 0 // open now, all workers (Atomics +1/-1; summed over the entry points: H_CONN_ACTIVE)
export const EC_PEAK = 1 // the most EC_OPEN was as a connection within global.max_connections opened (Atomics CAS)
export const EC_WORDS = 2
export const HEADER_WORDS = H_EP_CONNS + MAX_ENTRYPOINTS * EC_WORDS // 48

// per-server words (i32), at SERVERS_BASE + slot * SRV_WORDS. Read on every
// pick but written rarely (health, runtime commands), so the line stays cached
// in every core; what changes per request (in flight) is striped, C_INFLIGHT.
export const S_ADMIN = 0 // ADMIN_* below, set by the runtime socket / config API
export const S_CHECK = 1 // CHECK_* below, active health-check verdict
export const S_DOWN_UNTIL = 2 // passive: out of rotation until this tick (0 = not out)
export const S_FAILS = 3 // passive: failures counted in the current window
export const S_FAIL_START = 4 // passive: tick when the current window began
export const S_WEIGHT = 5 // effective weight 0..256 (set from config, changed by `set weight`)
export const S_STREAK = 6 // health-check streak: >0 consecutive passes, <0 consecutive failures
export const S_LAST_CHANGE = 7 // tick of the last UP/DOWN transition
export const S_CHECK_CODE = 8 // HTTP status of the last check (0 = connect error / time-out)
export const S_CHECK_MS = 9 // duration of the last check in ms
export const S_CHECK_FAILS = 10 // failed checks (chkfail)
export const S_DOWN_COUNT = 11 // UP→DOWN transitions (chkdown)
export const S_CHECK_STATUS = 12 // CHECK_STATUS_* below (HAProxy check_status)
export const S_CHECK_ERRNO = 13 // errno of the last check's failed connect or request (0 = none), os.constants.errno
export const SRV_WORDS = 16

export const ADMIN_READY = 0
export const ADMIN_DRAIN = 1
export const ADMIN_MAINT = 2
/** the admin states' names (runtime socket, config API, views), indexed by ADMIN_* */
export const ADMIN_STATES = ['ready', 'drain', 'maint'] as const

export const CHECK_UP = 1
export const CHECK_DOWN = 0

export const CHECK_STATUS = ['UNK', 'INI', 'L4OK', 'L4CON', 'L4TOUT', 'L7OK', 'L7STS', 'L7TOUT', 'L7RSP'] as const

// per-service words (i32), at SERVICES_BASE + slot * SVC_WORDS
export const V_CURSOR = 0 // round-robin / tie-break cursor (Atomics.add)
export const V_STATE_VERSION = 1 // bumped whenever a server's weight or usability may have changed
export const SVC_WORDS = 4

// Rate-limit table (i32): RATE_SETS sets of RATE_WAYS entries, 102,400 entries
// in all (the seed's stick table "size 100k", HAProxy k = 1024). Words of a
// set, from its base (way w = 0..7):
export const RATE_WAYS = 8
export const RS_KEY_A = 0 // + w: key hash, low bit forced to 1: 0 marks a never-used way
export const RS_KEY_B = RATE_WAYS // + w: second, independent key hash (64 key bits in all)
export const RS_LOCK = 2 * RATE_WAYS // 0 = free, else the holder's thread id and sequence stamp
export const RS_DATA = 3 * RATE_WAYS // + w * RATE_DATA_WORDS: the way's data words, below
export const RD_EXPIRE = 0 // tick after which the way is free for reuse
export const RD_SEEN = 1 // tick of the last use (least recently used goes first when a set is full)
export const RD_TICK = 2 // algorithm tick: window start (sliding window) or last drain (buckets)
export const RD_A = 3 // current-window count, or bucket level in 1/1000 request
export const RD_B = 4 // previous-window count (sliding window)
export const RATE_DATA_WORDS = 5
export const RATE_SET_WORDS = RS_DATA + RATE_WAYS * RATE_DATA_WORDS // 64
export const RATE_SETS = 12_800
export const RATE_ENTRIES = RATE_SETS * RATE_WAYS

// Names of the rate-table entries, one record per way (way index = set * RATE_WAYS + w), for the
// management surfaces (`show table`, the config API's stick_table_entries): the table itself
// keeps only hashes. Written by the worker that claims a way for a new source, under the set's
// lock; read by the control plane. Never read on the request path.
export const RN_OWNER = 0 // the rate limit the entry belongs to: its seed (keyA's), 0 = not named
export const RN_TEXT = 1 // + 0..RN_TEXT_WORDS-1: the source's key text, 4 Latin-1 chars per word (low byte first), NUL-padded
export const RN_TEXT_WORDS = 11
export const RN_CHARS = RN_TEXT_WORDS * 4 // 44: a canonical IPv6 address with a prefix length fits
export const RN_WORDS = RN_TEXT + RN_TEXT_WORDS

export const SERVERS_BASE = HEADER_WORDS
export let SERVICES_BASE = 0
export let RATE_BASE = 0 // a multiple of 16 words: sets start on cache lines
export let RATE_NAMES = 0 // RATE_ENTRIES × RN_WORDS
export let I32_WORDS = 0

// The cluster region ([cluster] only; core/cluster), after the rate table's names: a
// header, then a second rate table (same set format) holding the sources of
// `scope = "cluster"` rate limits, then per-way extras that the control plane
// fills at every sync with Redis, then the names of its ways (RN_*). Sized 0 without [cluster].
export const CLH_UP = 0 // 1 while Redis answers: cluster counts apply; 0 = each node its local share
export const CLH_NODES = 1 // live nodes (this one included) at the last heartbeat, >= 1
export const CLH_REFUSED_LOCAL = 2 // 429 decided on the local share (Redis down), Atomics.add
export const CLH_REFUSED_CLUSTER = 3 // 429 decided with the cluster's counts, Atomics.add
export const CLH_UNAVAILABLE = 4 // 503 of failure_mode = "closed" limits while Redis is down, Atomics.add
export const CLH_BELL = 5 // a worker wants a lease (CX_WANT set): Atomics.add + notify, the control plane waits on it
export const CLH_GRANTS = 6 // lease rounds done: Atomics.add + notify by the control plane, workers waiting for a lease wait on it
export const CLUSTER_HEADER_WORDS = 16
// extras of way w of cluster set s, at CLUSTER_EXTRA + (s * RATE_WAYS + w) * CX_WORDS
export const CX_KA = 0 // KEY_A the extras below belong to (a way changing hands invalidates them)
export const CX_OTHERS = 1 // the other nodes' window estimates (buckets: levels, units), summed, at the last round
export const CX_SYNCED = 2 // this node's own estimate (buckets: level) sent at the last round
export const CX_PERIOD = 3 // the entry's window (buckets: ms to drain a full bucket), written by the worker
export const CX_DRAIN = 4 // 0 = sliding window; buckets: µs to drain one request at the whole rate, rounded up (>= 1)
// leases (core/cluster/rate-lease.ts): this node's part of the cluster's limit, granted by Redis
export const CX_LEASE = 5 // most own estimate (buckets: level, units) this node may reach (Redis holds at least as much for it)
export const CX_ROOM = 6 // 1 = the last grant was all this node asked: it may ask for more; 0 = the cluster had no more
export const CX_WANT = 7 // 1 = a worker waits for a bigger lease (it rang CLH_BELL)
export const CX_LIMIT = 8 // the cluster's limit (requests per window; buckets: capacity, units), written by the worker
export const CX_RATE = 9 // buckets: this node's part of the rate, in RATE_PARTS (Redis holds at least as much for it)
export const CX_WORDS = 10
/** sets of the cluster table when [cluster] is on: 16,384 sources */
export const CLUSTER_SETS_ON = 2048
export let CLUSTER_SETS = 0
export let CLUSTER_BASE = 0
export let CLUSTER_TABLE = 0
export let CLUSTER_EXTRA = 0
export let CLUSTER_NAMES = 0

// Session revocations (core/shm/revocations.ts; the oidc middleware's logouts), after the
// cluster region: a header, then REVOKE_SETS sets of REVOKE_WAYS entries. An entry is a
// 64-bit key (a digest of a session id, a provider session or a subject) and two times
// in unix seconds (uint32: `>>> 0` to read): a session of that key born at or before AT is
// refused until EXP (the session's own end). Sets are 32 words, two cache lines: the keys
// on the first, the times on the second.
export const RVH_LOCK = 0 // writers' lock (adds are rare: logouts); readers take none
export const RVH_GEN = 1 // +1 after every change (add, epoch): a session checked at this value needs no new look
export const RVH_EPOCH = 2 // unix s; every session born at or before it is refused (set when the table is full; 0 = none)
export const RVH_RESETS = 3 // times the table was full and the epoch moved (lb_oidc_revocation_resets_total)
export const REVOKE_HEADER_WORDS = 16
export const REVOKE_WAYS = 8
export const RV_KEY_A = 0 // + w: first half of the key, low bit forced to 1: 0 marks a free way
export const RV_KEY_B = REVOKE_WAYS // + w
export const RV_EXP = 2 * REVOKE_WAYS // + w: unix s after which the entry is free
export const RV_AT = 3 * REVOKE_WAYS // + w: unix s of the revocation
export const REVOKE_SET_WORDS = 4 * REVOKE_WAYS // 32
/** default and floor of limits.session_revocations */
export const REVOKE_ENTRIES_DEFAULT = 65_536
export const REVOKE_ENTRIES_MIN = 64
export let REVOKE_SETS = REVOKE_ENTRIES_DEFAULT / REVOKE_WAYS
export let REVOKE_BASE = 0

// Requests in flight per (remote model server, model) pair, one word per slot, after the revocations
// (core/shm/model-inflight.ts): Atomics.add at a request's start and end, read by every pick of a model server.
// Then the hand-off cells (core/shm/fd-handoff.ts): 0 = free, else a connection worker 0 hands to another worker,
// owned by whoever swaps the cell back to 0.
export const MODEL_SLOTS = 4096
export let MODEL_BASE = 0
export const HANDOFF_CELLS = 256
export let HANDOFF_BASE = 0

// Generation budgets (core/shm/budget-records.ts; core/gen/budget/ledger.ts), [generation] with keys or limits only.
// i32, after the hand-off cells: a header, a lock word per keyed consumer (padded to a cache line), then the sets
// of the consumers without a key (users, addresses): BUDGET_WAYS ways, their keys (two hashes, as the rate
// table's), their last use (tick) and the set's lock. f64, after the stripes: a record of BR_WORDS per consumer,
// keyed first (by position in [[generation.keys]]), then set s way w at BUDGET_KEYED + s * BUDGET_WAYS + w; its
// fields are core/gen/budget/window.ts's Usage, read and written only under the record's lock.
export const BH_LEASING = 0 // 1 while the keys' budgets are leased from the cluster (core/gen/budget/lease.ts started)
export const BUDGET_HEADER_WORDS = 16
export const BUDGET_WAYS = 8
export const BS_KEY_A = 0 // + w: key hash, low bit forced to 1: 0 marks a free way
export const BS_KEY_B = BUDGET_WAYS // + w
export const BS_SEEN = 2 * BUDGET_WAYS // + w: tick of the last use (an idle way goes least recently used first)
export const BS_LOCK = 3 * BUDGET_WAYS
export const BUDGET_SET_WORDS = 32
/** a record's fields (f64 offsets): core/gen/budget/window.ts's Usage, whose fields have these names */
export const BR = {
  minute: 0, day: 1, requests: 2, minuteTokens: 3, dayTokens: 4, inFlight: 5, reservedMinute: 6, reservedDay: 7,
  otherRequests: 8, otherMinuteTokens: 9, otherDayTokens: 10, leaseR: 11, leaseT: 12, leaseD: 13, syncedR: 14, syncedT: 15,
  syncedD: 16, admitted: 17, admittedAtRound: 18, want: 19, wantTokens: 20, room: 21, fresh: 22, settled: 23,
} as const
export const BR_WORDS = 24
/** sets of the budget table of consumers without a key when they have limits: 16,384 consumers */
export const BUDGET_SETS_ON = 2048
export let BUDGET_KEYED = 0
export let BUDGET_SETS = 0
export let BUDGET_BASE = 0
export let BUDGET_LOCKS = 0
export let BUDGET_TABLE = 0
/** f64 index of the first budget record (after the stripes) */
export let BUDGET_RECORDS = 0

// global counters (f64) at the start of each stripe
export const G_REQUESTS = 0 // client requests (stub_status "requests")
export const G_ACCEPTS = 1 // client connections accepted, refused ones included (nginx "accepts")
export const G_WRITING = 2 // gauge: requests being processed (stub_status "Writing")
export const G_READING = 3 // gauge: requests whose body is being read (stub_status "Reading")
export const G_SSL_BACKEND_KEYS = 4 // full TLS handshakes (not resumed) done with servers (show info SslBackendKeyRate)
export const G_BYTES_OUT = 5 // response bodies, heads and chunk framing written to clients (show info TotalBytesOut)
export const G_RESP_1XX = 6 // ..G_RESP_5XX = 10, by status class
export const G_RESP_OTHER = 11
export const G_REFUSED = 12 // connections closed at once because global.max_connections were open (accepts - handled)
export const G_RATE_LIMITED = 13 // 429 answered by a middleware (rate limit refusals)
export const G_AUTH_REFUSED = 14 // 401/403 answered by a middleware (authentication refusals)
// gauge: this worker's share of H_CONN_ACTIVE, so that a dead worker's connections can be taken off it (clearGauges)
export const G_CONN_OPEN = 15
// [tracing] (core/worker/trace/exporter.ts): spans dropped (queue full, collector refused them, shut down before
// they left) and spans the collector accepted
export const G_TRACE_DROPPED = 16
export const G_TRACE_EXPORTED = 17
// + ep * EP_COUNTERS: this worker's counters of each entry point (with H_EP_CONNS: FRONTEND stot, conn_tot, rate, hrsp_*)
export const G_EP = 18
export const EP_ACCEPTS = 0 // client connections accepted, refused ones included (summed over the entry points: G_ACCEPTS)
export const EP_OPEN = 1 // gauge: this worker's share of EC_OPEN, taken off it when the worker dies (clearGauges)
export const EP_GRPC_1XX = 2 // ..+4: gRPC calls by the class of the HTTP status lb counts (their request-row cells hold the grpc-status)
export const EP_COUNTERS = 7
export const GLOBAL_COUNTERS = G_EP + MAX_ENTRYPOINTS * EP_COUNTERS // 130

/** A status's class as an offset from G_RESP_1XX or C_RESP_1XX: 0 (1xx) to 4 (5xx); codes outside 100-599 count in the nearest class. */
export function statusClass (status: number): number {
  return Math.min(4, Math.max(0, ((status / 100) | 0) - 1))
}

// per-server counters (f64), after the global counters of a stripe
export const C_SELECTED = 0 // times picked by the balancer (lbtot)
export const C_BYTES_IN = 1 // bytes received from the client and sent to this server
export const C_BYTES_OUT = 2 // bytes received from this server
export const C_RESP_1XX = 3 // ..C_RESP_5XX = 7
export const C_CONN_ERR = 8 // connect errors (econ)
export const C_RESP_ERR = 9 // resets, time-outs, invalid responses (eresp)
export const C_RETRIES = 10 // retries away from this server (wretr)
// gauge: requests (and tunnels) in flight from this thread to this server, +1 on pick and -1 on
// release; leastconn compares the sum over stripes. Striped, as an atomic add on a line other workers
// write costs ~85 ns against 3 ns for a plain add (bench/micro/shm-contention.bench.ts).
export const C_INFLIGHT = 11
// HAProxy's ctime/rtime/ttime: per thread, a sliding sum over the last
// TIME_SAMPLES answered requests (HAProxy's swrate: sum += v - sum / N), in ms:
// connect (0 on a reused connection), request sent to response head, and
// request start to end. C_TIMED counts the requests measured; the average of
// a server is sum(C_*_SUM) / sum(min(C_TIMED, TIME_SAMPLES)) over the stripes.
export const C_CT_SUM = 12
export const C_RT_SUM = 13
export const C_TT_SUM = 14
export const C_TIMED = 15
export const TIME_SAMPLES = 1024
export const SRV_COUNTERS = 16

// Request rows: one f64 counter per (method, code) for each entry point
// (index = position in the config, static) and each router (slot). Codes not
// listed are counted under their class ("2xx"...); methods not listed under OTHER.
export const REQ_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'OTHER'] as const
export const REQ_CODES = [
  '100', '101', '1xx',
  '200', '201', '202', '204', '206', '2xx',
  '301', '302', '304', '307', '308', '3xx',
  '400', '401', '403', '404', '405', '408', '409', '413', '429', '499', '4xx',
  '500', '502', '503', '504', '5xx',
  'other',
] as const
// gRPC calls (h2 requests with content-type application/grpc) are counted
// apart, by the grpc-status the client got (0-16; Traefik's protocol="grpc"
// rows carry that code), at REQ_GRPC_BASE + status: gRPC is POST only, so they
// need no method dimension, and 17 words per row cost less than a protocol
// dimension over every (method, code) cell.
export const REQ_GRPC_BASE = REQ_METHODS.length * REQ_CODES.length
export const REQ_GRPC_CODES = 17
export const REQ_ROW = REQ_GRPC_BASE + REQ_GRPC_CODES // index: method * REQ_CODES.length + code, or REQ_GRPC_BASE + grpc-status

// Time blocks: request-duration histogram (non-cumulative bucket counts, the
// last bucket is +Inf; cumulated at scrape), the sum of durations in seconds,
// and bytes in and out, for each entry point and router.
export const TIME_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const
export const T_SUM = TIME_BUCKETS_S.length + 1 // after the +Inf bucket
export const T_BYTES_IN = T_SUM + 1
export const T_BYTES_OUT = T_SUM + 2
// bytes of request heads as received (T_BYTES_IN counts bodies, as Traefik's
// requests_bytes_total): with it, `show stat` bin is what crossed the socket
export const T_HEAD_IN = T_SUM + 3
// bytes lb wrote to clients beyond the bodies of counted requests (response
// heads as written, chunk framing, health-location answers), entry point rows
// only: with it, `show stat` bout is what crossed the socket
export const T_HEAD_OUT = T_SUM + 4
export const TIME_BLOCK = 17

export let REQ_ROWS_BASE = 0 // entry points first, then routers
export let TIME_BLOCKS_BASE = 0
export let STRIPE_WORDS = 0

export const DEFAULT_CAPACITIES: Capacities = { services: 256, servers: 1024, routers: 256 }

/** Room for generation budgets: records for `keyed` consumers with a key and `sets` sets of the others. */
export interface BudgetRoom { readonly keyed: number, readonly sets: number }
export const NO_BUDGETS: BudgetRoom = { keyed: 0, sets: 0 }

/** Sizes the regions for `caps`, `workers`, `clusterSets`, `revokeSets` and `budget` (see the `let` bindings above). */
export function setCapacities (caps: Capacities, workers: number, clusterSets = 0, revokeSets = REVOKE_ENTRIES_DEFAULT / REVOKE_WAYS, budget = NO_BUDGETS): void {
  MAX_SERVICES = caps.services
  MAX_SERVERS = caps.servers
  MAX_ROUTERS = caps.routers
  SERVICES_BASE = SERVERS_BASE + MAX_SERVERS * SRV_WORDS
  RATE_BASE = Math.ceil((SERVICES_BASE + MAX_SERVICES * SVC_WORDS) / 16) * 16
  RATE_NAMES = RATE_BASE + RATE_SETS * RATE_SET_WORDS
  CLUSTER_SETS = clusterSets
  CLUSTER_BASE = RATE_NAMES + RATE_ENTRIES * RN_WORDS
  CLUSTER_TABLE = CLUSTER_BASE + CLUSTER_HEADER_WORDS
  CLUSTER_EXTRA = CLUSTER_TABLE + clusterSets * RATE_SET_WORDS
  CLUSTER_NAMES = CLUSTER_EXTRA + clusterSets * RATE_WAYS * CX_WORDS
  REVOKE_SETS = revokeSets
  REVOKE_BASE = Math.ceil((clusterSets === 0 ? CLUSTER_BASE : CLUSTER_NAMES + clusterSets * RATE_WAYS * RN_WORDS) / 16) * 16
  MODEL_BASE = REVOKE_BASE + REVOKE_HEADER_WORDS + revokeSets * REVOKE_SET_WORDS
  HANDOFF_BASE = MODEL_BASE + MODEL_SLOTS
  BUDGET_KEYED = budget.keyed
  BUDGET_SETS = budget.sets
  BUDGET_BASE = Math.ceil((HANDOFF_BASE + HANDOFF_CELLS) / 16) * 16
  BUDGET_LOCKS = BUDGET_BASE + BUDGET_HEADER_WORDS
  BUDGET_TABLE = BUDGET_LOCKS + Math.ceil(budget.keyed / 16) * 16
  I32_WORDS = BUDGET_TABLE + budget.sets * BUDGET_SET_WORDS
  REQ_ROWS_BASE = GLOBAL_COUNTERS + MAX_SERVERS * SRV_COUNTERS
  TIME_BLOCKS_BASE = REQ_ROWS_BASE + (MAX_ENTRYPOINTS + MAX_ROUTERS) * REQ_ROW
  STRIPE_WORDS = TIME_BLOCKS_BASE + (MAX_ENTRYPOINTS + MAX_ROUTERS) * TIME_BLOCK
  BUDGET_RECORDS = (workers + 1) * STRIPE_WORDS
}
setCapacities(DEFAULT_CAPACITIES, 1)

export const budgetRecords = (b: BudgetRoom): number => b.keyed + b.sets * BUDGET_WAYS

export interface Shm {
  readonly buffer: SharedArrayBuffer
  readonly i32: Int32Array
  readonly f64: Float64Array
  /** number of data-plane workers; stripe `workers` belongs to the control plane */
  readonly workers: number
}

/** Sets of the revocation table for limits.session_revocations entries (rounded up to whole sets). */
export function revocationSets (entries: number): number {
  return Math.ceil(Math.max(REVOKE_ENTRIES_MIN, entries) / REVOKE_WAYS)
}

export function serverBase (slot: number): number { return SERVERS_BASE + slot * SRV_WORDS }
export function serviceBase (slot: number): number { return SERVICES_BASE + slot * SVC_WORDS }
export function stripeBase (stripe: number): number { return stripe * STRIPE_WORDS }
export function serverCounterBase (stripe: number, slot: number): number { return stripe * STRIPE_WORDS + GLOBAL_COUNTERS + slot * SRV_COUNTERS }
