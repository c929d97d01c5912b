// lb nodes of one cluster for the cluster tests: each a real balancer (2
// workers) with the config API, dashboard API, /metrics and runtime socket,
// a rate-limited route and a [cluster] section pointing at the test's Redis.
import { after, before } from 'node:test'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { type Backend, startBackend } from '../helpers.js'
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
  /** extra [cluster] lines */
  readonly cluster?: string
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
[services.web]
[[services.web.servers]]
name = "s1"
address = "${backend.address}"
check = false

[cluster]
url = "${redisUrl}"
node = "${name}"
sync_interval = "100ms"
node_ttl = "1500ms"
# the default 50 ms is for a real network; on a test machine shared with other work a loaded
# Redis may take longer, and these tests are about the cluster, not about a slow Redis
max_wait = "1s"
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
  /** null when redis-server is missing (the tests skip) */
  redis: RedisServer | null
  readonly nodes: AdminLb[]
}

/** Registers before/after hooks in the calling suite: a Redis, a backend and nodes a, b, c; everything stopped after. */
export function clusterFixture (): ClusterFixture {
  const f: ClusterFixture = { redis: null, nodes: [] }
  let backend: Backend | null = null
  before(async (t) => {
    const bin = redisBinary(t as never)
    if (bin === null) return
    f.redis = await startRedis(bin)
    backend = await startBackend('web')
    for (const name of ['a', 'b', 'c']) f.nodes.push(await startNode(backend, f.redis.url, name))
  })
  after(async () => {
    for (const n of f.nodes) await n.lb.stop()
    await backend?.close()
    await f.redis?.stop()
  })
  return f
}
