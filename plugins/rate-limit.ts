// rateLimit: per-source request limits held in the shared rate table
// (core/shm/rate-table.ts), so a limit is exact across every worker. Three
// algorithms, one per model balancer:
//
//   slidingWindow  HAProxy stick table + http_req_rate: more than `limit`
//                  requests within `period` (sliding) → 429. Refused requests
//                  count too, as with track-sc0.
//   leakyBucket    nginx limit_req: `rate` ("10r/s", "600r/m") with `burst`;
//                  requests within the burst are delayed to the rate unless
//                  `nodelay` (nginx's default is to delay), beyond it → 429.
//   tokenBucket    Traefik rateLimit: `average` requests per `period` with a
//                  bucket of `burst` tokens; no token → 429.
//
// Every 429 carries Retry-After (whole seconds, rounded up, as Traefik). The
// source is the client address, or X-Forwarded-For from trusted proxies only
// (core/net/source.ts). Entries expire 30 s after their last use (the seed's
// stick table "expire 30s"), or later when the algorithm needs their state longer.
//
// scope = "cluster" (every algorithm): the limit holds over every node of the
// [cluster] together (docs/cluster.md). The request path stays on shared
// memory, in the cluster table; the control plane exchanges the counts with
// Redis every sync_interval (core/cluster/rate-sync.ts). Without [cluster]
// the table is absent and the limit counts on this node alone. While this
// node judges Redis down, the limit counts on its local share (failure_mode
// = "open", the default) or answers 503 (failure_mode = "closed").
//
// Every entry claimed for a new source is named (this limit's seed, the
// source's text), so `show table` and the config API can list a limit's
// sources (limitTable below).
import {
  type Checker, type Ctx, type LimitTable, type Reply, type SourceConf, type Table, type Verdict, ASK_LEASE, HANDLED, KeyHasher, MILLI, NEXT,
  ipv6Prefix, RateTable, SOURCE_KEYS, canonicalIp, checkSource, clusterDown, clusterTable, compileSource, countClusterRefusal, countUnavailable, definePlugin,
  type KeySpace, formatError, join, keyA, keyB, keySpace, LEASE_ROUND_MS, LEASE_WAIT_MS, leaseRounds, nextLeaseRound, now, parseIp,
} from 'lb/plugin'

export const ALGORITHMS = ['tokenBucket', 'leakyBucket', 'slidingWindow'] as const
export type Algorithm = typeof ALGORITHMS[number]
export const SCOPES = ['local', 'cluster'] as const
export type Scope = typeof SCOPES[number]
export const FAILURE_MODES = ['open', 'closed'] as const
export type FailureMode = typeof FAILURE_MODES[number]

/** Seed: stick-table entries expire 30 s after their last use. */
export const ENTRY_TTL_MS = 30_000
/** Longest an entry is kept (ticks compare correctly for under 24 days). */
const MAX_TTL_MS = 7 * 86_400_000
const MAX_PERIOD_MS = 86_400_000

export interface RateLimitConf {
  readonly algorithm: Algorithm
  /** slidingWindow: requests allowed per window (more → 429) */
  readonly limit: number
  /** slidingWindow: window length; tokenBucket: the period `average` is counted over (ms) */
  readonly periodMs: number
  /** leakyBucket: requests per second (a "r/m" rate is divided by 60); tokenBucket: average / period */
  readonly ratePerSec: number
  /** leakyBucket: requests beyond the rate held (delayed or, with nodelay, passed); tokenBucket: bucket size */
  readonly burst: number
  /** leakyBucket: pass burst requests at once instead of delaying them to the rate */
  readonly nodelay: boolean
  readonly source: SourceConf
  /** an IPv6 source counts by its network of this many leading bits (Traefik ipv6Subnet). Default: 64 */
  readonly ipv6Subnet: number
  /** local: this node's workers; cluster: every node of [cluster] */
  readonly scope: Scope
  /** scope = "cluster", while Redis is down: open = each node its local share; closed = 503 */
  readonly failureMode: FailureMode
}

const COMMON_KEYS = ['algorithm', 'scope', 'failure_mode', 'ipv6_subnet', ...SOURCE_KEYS]
const KEYS: Record<Algorithm, readonly string[]> = {
  tokenBucket: [...COMMON_KEYS, 'average', 'period', 'burst'],
  leakyBucket: [...COMMON_KEYS, 'rate', 'burst', 'nodelay'],
  slidingWindow: [...COMMON_KEYS, 'limit', 'period'],
}

const RATE = /^(\d+(?:\.\d+)?)r\/(s|m)$/
const MAX_RATE = 1_000_000 // per second; keeps levels (burst × 1000 units) inside an Int32
const MAX_BURST = 1_000_000

function checkRate (c: Checker, t: Table, path: string): number {
  const v = t.rate
  const expected = 'a rate like "10r/s" or "600r/m"'
  if (typeof v === 'number' && v > 0 && v <= MAX_RATE) return v
  const m = typeof v === 'string' ? RATE.exec(v) : null
  const r = m === null ? NaN : Number(m[1]) / (m[2] === 'm' ? 60 : 1)
  if (!(r > 0 && r <= MAX_RATE)) {
    c.problem(join(path, 'rate'), v === undefined ? `${expected} (required)` : `${expected}, above 0 and at most ${MAX_RATE}r/s`, v)
    return 1
  }
  return r
}

function checkPeriod (c: Checker, t: Table, path: string, def: number): number {
  const ms = c.duration(t, 'period', path, def, 1)
  if (ms > MAX_PERIOD_MS) c.problem(join(path, 'period'), 'a duration of at most "24h"', t.period)
  return Math.min(ms, MAX_PERIOD_MS)
}

function validate (c: Checker, t: Table, path: string): RateLimitConf {
  const algorithm = c.oneOf(t, 'algorithm', path, ALGORITHMS, 'tokenBucket')
  // keys are checked against the chosen algorithm's only when the algorithm itself is valid
  if (t.algorithm === undefined || (ALGORITHMS as readonly unknown[]).includes(t.algorithm)) c.table(t, path, KEYS[algorithm])
  const source = checkSource(c, t, path)
  // a /64 by default: a client rotating addresses inside its own network would otherwise never be counted twice
  const ipv6Subnet = c.int(t, 'ipv6_subnet', path, 64, 1, 128)
  const scope = c.oneOf(t, 'scope', path, SCOPES, 'local')
  const failureMode = c.oneOf(t, 'failure_mode', path, FAILURE_MODES, 'open')
  if (t.failure_mode !== undefined && scope !== 'cluster') c.problems.push(`${join(path, 'failure_mode')}: only with scope = "cluster" (a local limit never waits for Redis)`)
  const common = { source, ipv6Subnet, scope, failureMode }
  switch (algorithm) {
    case 'slidingWindow':
      return {
        algorithm,
        limit: c.int(t, 'limit', path, undefined, 1, 1_000_000_000),
        periodMs: checkPeriod(c, t, path, 10_000),
        ratePerSec: 0,
        burst: 0,
        nodelay: false,
        ...common,
      }
    case 'leakyBucket':
      return {
        algorithm,
        limit: 0,
        periodMs: 1000,
        ratePerSec: checkRate(c, t, path),
        burst: c.int(t, 'burst', path, 0, 0, MAX_BURST),
        nodelay: c.bool(t, 'nodelay', path, false),
        ...common,
      }
    case 'tokenBucket': {
      const average = c.int(t, 'average', path, undefined, 1, 1_000_000_000)
      const periodMs = checkPeriod(c, t, path, 1000)
      const ratePerSec = (average * 1000) / periodMs
      if (ratePerSec > MAX_RATE) c.problem(join(path, 'average'), `at most ${MAX_RATE} requests per second over the period`, average)
      return { algorithm, limit: 0, periodMs, ratePerSec, burst: c.int(t, 'burst', path, 1, 1, MAX_BURST), nodelay: true, ...common }
    }
  }
}

// 429 replies by Retry-After seconds, built on first use and shared: refusing allocates nothing.
const TOO_MANY: Reply[] = []
const TOO_MANY_BODY = formatError('LB_ERR_RATE_LIMITED') + '\n'

export function tooMany (waitMs: number): Reply {
  const s = Math.min(86_400, Math.max(1, Math.ceil(waitMs / 1000)))
  return (TOO_MANY[s] ??= Object.freeze({
    status: 429,
    headers: Object.freeze(['content-type', 'text/plain', 'retry-after', String(s)]) as string[],
    body: TOO_MANY_BODY,
  }) as Reply)
}

const hasher = new KeyHasher()

/** Hashes the source into ctx once per request, whatever number of rate limits run on it. */
function hashSource (ctx: Ctx, key: string): void {
  if (ctx.rateKey === key) return
  hasher.hash(key)
  ctx.rateKey = key
  ctx.rateHashA = hasher.a
  ctx.rateHashB = hasher.b
}

/** Each middleware instance (and algorithm) has its own key space of the shared table. */
const spaceOf = (name: string, algorithm: Algorithm): KeySpace => keySpace(`${algorithm}\u0000${name}`)

/** The 503 of a failure_mode = "closed" limit while Redis is down (ERRORS.md LB_ERR_RATE_LIMIT_UNAVAILABLE). */
function unavailable (name: string): Reply {
  return Object.freeze({
    status: 503,
    headers: Object.freeze(['content-type', 'text/plain', 'retry-after', '1']) as string[],
    body: formatError('LB_ERR_RATE_LIMIT_UNAVAILABLE', { middleware: name }) + '\n',
  }) as Reply
}

/**
 * The management view of the rateLimit middleware `name` (core/shm/rate-entries.ts):
 * where its entries are and how to read and find them. The same key
 * derivation as the request path: a source's text (as sourceOf makes it) hashed
 * with the limit's seeds.
 */
export function limitTable (name: string, conf: RateLimitConf): LimitTable {
  const { seedA, seedB, owner } = spaceOf(name, conf.algorithm)
  const window = conf.algorithm === 'slidingWindow'
  const h = new KeyHasher()
  return {
    name,
    algorithm: conf.algorithm,
    scope: conf.scope,
    owner,
    kind: window ? 'window' : 'bucket',
    periodMs: conf.periodMs,
    limit: window ? conf.limit : (conf.algorithm === 'leakyBucket' ? conf.burst + 1 : conf.burst),
    drainPerMs: conf.ratePerSec,
    keyOf (source) {
      // an address as the request path writes it: canonical, an IPv6 one cut to its counted prefix
      const addr = source.replace(/\/\d+$/, '')
      if (parseIp(addr) === null) return null
      const text = ipv6Prefix(canonicalIp(addr), conf.ipv6Subnet)
      h.hash(text)
      return { ka: keyA(h.a, seedA), kb: keyB(h.b, seedB), text }
    },
  }
}

/** A table call of a cluster-scope limit: window() or bucket() with the request's keys, `ask` as they take it. */
type Attempt = (ctx: Ctx, ka: number, kb: number, ask: boolean) => number

/**
 * The request path of a cluster-scope limit, both kinds (core/cluster/rate-lease.ts):
 * `attempt` admits or refuses on shared memory while this node's lease lasts;
 * past it, the answer is ASK_LEASE and the request waits for lease rounds (off
 * the hot path) before it is tried again; `decided` turns the table's answer
 * into the verdict.
 */
function clusterPath (i32: Int32Array, sourceOf: (ctx: Ctx) => string, seedA: number, seedB: number, closed: Reply | null,
  attempt: Attempt, decided: (ctx: Ctx, r: number) => Verdict | Promise<Verdict>) {
  // off the hot path: the source is past its lease and the control plane asks Redis for more
  const waitLease = async (ctx: Ctx, ka: number, kb: number, seen: number): Promise<Verdict> => {
    const start = now()
    for (;;) {
      await nextLeaseRound(i32, seen, LEASE_ROUND_MS)
      seen = leaseRounds(i32)
      // Redis judged down meanwhile (the rounds this request waited on failed): as for a request that finds it down
      if (closed !== null && clusterDown(i32)) {
        countUnavailable(i32)
        ctx.reply = closed
        return HANDLED
      }
      const r = attempt(ctx, ka, kb, ((now() - start) | 0) < LEASE_WAIT_MS)
      if (r !== ASK_LEASE) return await decided(ctx, r)
    }
  }
  return {
    onRequest (ctx: Ctx): Verdict | Promise<Verdict> {
      if (closed !== null && clusterDown(i32)) {
        countUnavailable(i32)
        ctx.reply = closed
        return HANDLED
      }
      hashSource(ctx, sourceOf(ctx))
      const ka = keyA(ctx.rateHashA, seedA)
      const kb = keyB(ctx.rateHashB, seedB)
      const seen = leaseRounds(i32)
      const r = attempt(ctx, ka, kb, true)
      return r === ASK_LEASE ? waitLease(ctx, ka, kb, seen) : decided(ctx, r)
    },
  }
}

/** A 429 of a cluster-scope limit, counted as decided with the cluster's leases or on the local share. */
function refuseCluster (i32: Int32Array, ctx: Ctx, waitMs: number): Verdict {
  countClusterRefusal(i32)
  ctx.reply = tooMany(waitMs)
  return HANDLED
}

function delay (ms: number): Promise<Verdict> {
  return new Promise((resolve) => setTimeout(resolve, ms, NEXT))
}

export default definePlugin<RateLimitConf>({
  name: 'rateLimit',
  api: 1,
  validate,
  create (conf, env) {
    const table = new RateTable(env.shm.i32)
    const peerOf = compileSource(conf.source)
    const bits = conf.ipv6Subnet
    // the key text is remade only when the source changes (ipv6Prefix parses and formats an IPv6 address)
    let lastPeer = ''
    let lastKey = ''
    const sourceOf = bits >= 128
      ? peerOf
      : (ctx: Ctx): string => {
          const peer = peerOf(ctx)
          if (peer !== lastPeer) {
            lastPeer = peer
            lastKey = ipv6Prefix(peer, bits)
          }
          return lastKey
        }
    const { seedA, seedB, owner } = spaceOf(env.name, conf.algorithm)
    const i32 = env.shm.i32
    const cluster = conf.scope === 'cluster' ? clusterTable(i32) : null
    // scope = "cluster" without [cluster] counts locally and never waits for a Redis it does not have
    const closed = cluster !== null && conf.failureMode === 'closed' ? unavailable(env.name) : null
    if (conf.algorithm === 'slidingWindow') {
      const { periodMs, limit } = conf
      const ttl = Math.min(MAX_TTL_MS, Math.max(ENTRY_TTL_MS, 2 * periodMs))
      if (cluster !== null) {
        const { table: ct, cx } = cluster
        return clusterPath(i32, sourceOf, seedA, seedB, closed,
          (ctx, ka, kb, ask) => ct.window(ka, kb, now(), periodMs, limit, ttl, cx, owner, ctx.rateKey, ask),
          (ctx, r) => r === 0 ? NEXT : refuseCluster(i32, ctx, -r))
      }
      return {
        onRequest (ctx) {
          hashSource(ctx, sourceOf(ctx))
          const r = table.window(keyA(ctx.rateHashA, seedA), keyB(ctx.rateHashB, seedB), now(), periodMs, limit, ttl, -1, owner, ctx.rateKey)
          if (r === 0) return NEXT
          ctx.reply = tooMany(-r)
          return HANDLED
        },
      }
    }
    // buckets: leakyBucket holds the current request plus `burst` (nginx passes burst + 1 at once),
    // tokenBucket holds `burst` tokens
    const drainPerMs = conf.ratePerSec // units (1/1000 request) per ms = requests per second
    const capacity = (conf.algorithm === 'leakyBucket' ? conf.burst + 1 : conf.burst) * MILLI
    const ttl = Math.min(MAX_TTL_MS, Math.max(ENTRY_TTL_MS, Math.ceil(capacity / drainPerMs)))
    const nodelay = conf.nodelay
    // nginx without nodelay: a request within the burst waits until the rate allows it (with
    // scope = "cluster", as if this node had the whole rate: the delay never changes what is admitted)
    const paced = (r: number): Verdict | Promise<Verdict> => {
      if (nodelay || r === 0) return NEXT
      const ms = Math.ceil(r / drainPerMs)
      return ms < 1 ? NEXT : delay(ms)
    }
    if (cluster !== null) {
      // the same bucket in the cluster table, on this node's lease of its capacity and rate
      const { table: ct, cx } = cluster
      return clusterPath(i32, sourceOf, seedA, seedB, closed,
        (ctx, ka, kb, ask) => ct.bucket(ka, kb, now(), capacity, drainPerMs, ttl, cx, owner, ctx.rateKey, ask),
        (ctx, r) => r < 0 ? refuseCluster(i32, ctx, -r) : paced(r))
    }
    return {
      onRequest (ctx) {
        hashSource(ctx, sourceOf(ctx))
        const r = table.bucket(keyA(ctx.rateHashA, seedA), keyB(ctx.rateHashB, seedB), now(), capacity, drainPerMs, ttl, -1, owner, ctx.rateKey)
        if (r >= 0) return paced(r)
        ctx.reply = tooMany(-r)
        return HANDLED
      },
    }
  },
})
