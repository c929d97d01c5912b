// lb nodes of one cluster for the cluster tests: each a real balancer (2
// workers) with the config API, dashboard API, /metrics and runtime socket,
// a rate-limited route and a [cluster] section pointing at the test's Redis.
import { after, before } from 'node:test'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { type Backend, type Reply, request, sleep, startBackend } from '../helpers.js'
import { type RedisServer, redisBinary, startRedis } from './redis.js'

/** The [middlewares.rl] of every node: 100 requests per 10 s over the whole cluster. */
export const WINDOW = `[middlewares.rl]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 100
period = "10s"
scope = "cluster"
`

export interface NodeOptions {
  /** [middlewares.rl] (default WINDOW) */
  readonly middleware?: string
  /** extra [cluster] lines (one setting max_wait replaces the tests' 1 s) */
  readonly cluster?: string
  /** in place of `url`: the [cluster] lines naming Redis (sentinels, master_name) */
  readonly redis?: string
  /** more routers and middlewares */
  readonly extra?: string
}

export function nodeConfig (backend: Backend, redisUrl: string, name: string, o: NodeOptions = {}): string {
  return `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"

[routers.limited]
rule = "PathPrefix(\`/limited\`)"
service = "web"
middlewares = ["rl"]

[routers.open]
rule = "PathPrefix(\`/\`)"
service = "web"

${o.middleware ?? WINDOW}
${o.extra ?? ''}
[services.web]
[[services.web.servers]]
name = "s1"
address = "${backend.address}"
check = false

[cluster]
${o.redis ?? `url = "${redisUrl}"`}
node = "${name}"
sync_interval = "100ms"
node_ttl = "1500ms"
${/^max_wait\b/m.test(o.cluster ?? '')
  ? ''
  : `# the default 50 ms is for a real network; on a test machine shared with other work a loaded
# Redis may take longer, and these tests are about the cluster, not about a slow Redis
max_wait = "1s"`}
${o.cluster ?? ''}
`
}

export function startNode (backend: Backend, redisUrl: string, name: string, o: NodeOptions = {}): Promise<AdminLb> {
  return startAdminLb(nodeConfig(backend, redisUrl, name, o))
}

/** Waits until `f` holds (polled every 20 ms), at most `ms`; throws with `what` otherwise. */
export async function until (what: string, f: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
  for (const end = Date.now() + ms; ;) {
    if (await f()) return
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

export interface ClusterFixture {
  /** the suite's Redis, started by its before hook */
  readonly redis: RedisServer
  readonly nodes: AdminLb[]
}

export interface FixtureOptions extends NodeOptions {
  /** more redis-server arguments */
  readonly redisArgs?: readonly string[]
  /** node names (default a, b, c) */
  readonly names?: readonly string[]
}

/** Registers before/after hooks in the calling suite: a Redis, a backend and nodes a, b, c; everything stopped after. */
export function clusterFixture (o: FixtureOptions = {}): ClusterFixture {
  let redis: RedisServer | null = null
  const f: ClusterFixture = {
    get redis () {
      if (redis === null) throw new Error('the cluster fixture\'s Redis did not start (see the before hook)')
      return redis
    },
    nodes: [],
  }
  let backend: Backend | null = null
  before(async () => {
    redis = await startRedis(redisBinary(), undefined, o.redisArgs)
    backend = await startBackend('web')
    for (const name of o.names ?? ['a', 'b', 'c']) f.nodes.push(await startNode(backend, redis.url, name, o))
  })
  after(async () => {
    for (const n of f.nodes) await n.lb.stop()
    await backend?.close()
    await redis?.stop()
  })
  return f
}

/**
 * `n` requests to `path` from `from`, round robin over `nodes`, one every `gapMs`:
 * the replies in order, and the ms from the first request sent to the last.
 */
export async function spread (nodes: AdminLb[], n: number, gapMs: number, from: string, path = '/limited'): Promise<{ replies: Reply[], ms: number }> {
  const pending: Array<Promise<Reply>> = []
  const start = Date.now()
  let last = start
  for (let i = 0; i < n; i++) {
    const wait = start + i * gapMs - Date.now()
    if (wait > 0) await sleep(wait)
    last = Date.now()
    pending.push(request(`${nodes[i % nodes.length]!.lb.url}${path}`, { localAddress: from }))
  }
  return { replies: await Promise.all(pending), ms: last - start }
}

/** `n` requests to `path` from `from`, round robin over `nodes`, `inFlight` at a time and no pause between them; a failed one is status 0. */
export async function burst (nodes: AdminLb[], n: number, inFlight: number, from: string, path = '/limited'): Promise<Reply[]> {
  const out: Reply[] = new Array(n)
  let next = 0
  const lane = async (): Promise<void> => {
    for (let i = next++; i < n; i = next++) {
      out[i] = await request(`${nodes[i % nodes.length]!.lb.url}${path}`, { localAddress: from })
        .catch((err: Error) => ({ status: 0, headers: {}, body: err.message }))
    }
  }
  await Promise.all(Array.from({ length: inFlight }, lane))
  return out
}

/** Scripts run by Redis so far (EVALSHA and EVAL): every lease round and sync of every node, and the heartbeats. */
export async function scriptCalls (redis: ReturnType<RedisServer['client']>): Promise<number> {
  const info = await redis.info('commandstats')
  let n = 0
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) n += Number(m[1])
  return n
}

export const ok = (rs: Reply[]): number => rs.filter((r) => r.status === 200).length

/** The value of an unlabelled (or fully written) metric on a node's /metrics; NaN when absent. */
export async function metric (a: AdminLb, name: string): Promise<number> {
  const r = await request(`${a.dash}/metrics`)
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(r.body)
  return m === null ? NaN : Number(m[1])
}
