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
// the table is absent and the limit counts on this node alone.
import { type Checker, type ClusterTable, type Ctx, type Reply, type SourceConf, type Table, type Verdict, HANDLED, KeyHasher, MILLI, NEXT, ipv6Prefix, RateTable, SOURCE_KEYS, checkSource, clusterTable, compileSource, countClusterRefusal, definePlugin, fmix32, formatError, join, keyA, keyB, now } from 'lb/plugin'

export const ALGORITHMS = ['tokenBucket', 'leakyBucket', 'slidingWindow'] as const
export type Algorithm = typeof ALGORITHMS[number]
export const SCOPES = ['local', 'cluster'] as const
export type Scope = typeof SCOPES[number]

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
}

const COMMON_KEYS = ['algorithm', 'scope', 'ipv6_subnet', ...SOURCE_KEYS]
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
  switch (algorithm) {
    case 'slidingWindow':
      return {
        algorithm,
        limit: c.int(t, 'limit', path, undefined, 1, 1_000_000_000),
        periodMs: checkPeriod(c, t, path, 10_000),
        ratePerSec: 0,
        burst: 0,
        nodelay: false,
        source,
        ipv6Subnet,
        scope,
      }
    case 'leakyBucket':
      return {
        algorithm,
        limit: 0,
        periodMs: 1000,
        ratePerSec: checkRate(c, t, path),
        burst: c.int(t, 'burst', path, 0, 0, MAX_BURST),
        nodelay: c.bool(t, 'nodelay', path, false),
        source,
        ipv6Subnet,
        scope,
      }
    case 'tokenBucket': {
      const average = c.int(t, 'average', path, undefined, 1, 1_000_000_000)
      const periodMs = checkPeriod(c, t, path, 1000)
      const ratePerSec = (average * 1000) / periodMs
      if (ratePerSec > MAX_RATE) c.problem(join(path, 'average'), `at most ${MAX_RATE} requests per second over the period`, average)
      return { algorithm, limit: 0, periodMs, ratePerSec, burst: c.int(t, 'burst', path, 1, 1, MAX_BURST), nodelay: true, source, ipv6Subnet, scope }
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

/** Seeds that put each middleware instance (and algorithm) in its own key space of the shared table. */
function seeds (name: string, algorithm: Algorithm): [number, number] {
  hasher.hash(`${algorithm}\u0000${name}`)
  return [hasher.a, fmix32(hasher.b + 0x9e3779b9)]
}

/** slidingWindow over the cluster table: the same counting, the limit split with the other nodes (core/shm/cluster-limit.ts). */
function clusterWindow (cluster: ClusterTable, i32: Int32Array, sourceOf: (ctx: Ctx) => string, seedA: number, seedB: number, periodMs: number, limit: number, ttl: number) {
  const { table, cx } = cluster
  return {
    onRequest (ctx: Ctx): Verdict {
      hashSource(ctx, sourceOf(ctx))
      const r = table.window(keyA(ctx.rateHashA, seedA), keyB(ctx.rateHashB, seedB), now(), periodMs, limit, ttl, cx)
      if (r === 0) return NEXT
      countClusterRefusal(i32)
      ctx.reply = tooMany(-r)
      return HANDLED
    },
  }
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
    const [seedA, seedB] = seeds(env.name, conf.algorithm)
    if (conf.algorithm === 'slidingWindow') {
      const { periodMs, limit } = conf
      const ttl = Math.min(MAX_TTL_MS, Math.max(ENTRY_TTL_MS, 2 * periodMs))
      const cluster = conf.scope === 'cluster' ? clusterTable(env.shm.i32) : null
      if (cluster !== null) return clusterWindow(cluster, env.shm.i32, sourceOf, seedA, seedB, periodMs, limit, ttl)
      return {
        onRequest (ctx) {
          hashSource(ctx, sourceOf(ctx))
          const r = table.window(keyA(ctx.rateHashA, seedA), keyB(ctx.rateHashB, seedB), now(), periodMs, limit, ttl)
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
    // scope = "cluster": the same bucket in the cluster table, its capacity and rate shared with the other nodes
    const cluster = conf.scope === 'cluster' ? clusterTable(env.shm.i32) : null
    const bucketTable = cluster?.table ?? table
    const cx = cluster?.cx ?? -1
    return {
      onRequest (ctx) {
        hashSource(ctx, sourceOf(ctx))
        const r = bucketTable.bucket(keyA(ctx.rateHashA, seedA), keyB(ctx.rateHashB, seedB), now(), capacity, drainPerMs, ttl, cx)
        if (r < 0) {
          if (cx >= 0) countClusterRefusal(env.shm.i32)
          ctx.reply = tooMany(-r)
          return HANDLED
        }
        if (nodelay || r === 0) return NEXT
        // nginx without nodelay: a request within the burst waits until the rate allows it (with
        // scope = "cluster", as if this node had the whole rate: the delay never changes what is admitted)
        const ms = Math.ceil(r / drainPerMs)
        return ms < 1 ? NEXT : delay(ms)
      },
    }
  },
})
