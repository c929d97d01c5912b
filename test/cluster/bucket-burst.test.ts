// Bursts against cluster-scope buckets (#38): three real lb nodes (2 workers
// each) on one real redis-server, a token bucket of burst 100 refilled at 10
// per second (average 100 per 10 s) and nginx's leaky bucket of 10r/s with
// burst 99 and nodelay (the request itself plus 99 at once: the same 100). One
// bucket fed every request would admit its capacity plus what the rate refills
// while the requests come: 100 + 10 × seconds. Whatever the arrival pattern
// (unpaced round robin, all to one node, paced), the cluster must admit that
// within 5%, neither over it nor short of it (false 429s).
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { sock } from '../admin/util.js'
import type { Reply } from '../helpers.js'
import { burst, clusterFixture, ok, scriptCalls, spread, until } from './nodes.js'

const BUCKETS = `[middlewares.rl]
type = "rateLimit"
algorithm = "tokenBucket"
average = 100
period = "10s"
burst = 100
scope = "cluster"

[middlewares.lk]
type = "rateLimit"
algorithm = "leakyBucket"
rate = "10r/s"
burst = 99
nodelay = true
scope = "cluster"

[routers.leaky]
rule = "PathPrefix(\`/leaky\`)"
service = "web"
middlewares = ["lk"]
`

const CAPACITY = 100
const PER_SECOND = 10

/** Admitted replies of `rs`, checked against one bucket fed for `ms`: within 5% of capacity + rate × seconds. */
function check (rs: Reply[], ms: number, what: string): string {
  assert.deepEqual(rs.filter((r) => r.status !== 200 && r.status !== 429).map((r) => `${r.status} ${r.body.slice(0, 80)}`), [], `${what}: only 200 and 429`)
  const admitted = ok(rs)
  const theory = CAPACITY + (PER_SECOND * ms) / 1000
  const said = `${what}: admitted ${admitted} in ${ms} ms, one bucket ${theory.toFixed(1)}`
  assert.ok(admitted <= 1.05 * theory, `${said}: more than 5% over`)
  assert.ok(admitted >= 0.95 * theory, `${said}: ${(theory - admitted).toFixed(1)} false 429s`)
  return said
}

describe('cluster: bursts against token and leaky buckets admit one bucket\'s worth within 5%', () => {
  const f = clusterFixture({ middleware: BUCKETS })
  const nodes = f.nodes
  let source = 100
  const next = (): string => `127.0.0.${source++}`

  for (const [name, path] of [['token bucket', '/limited'], ['leaky bucket', '/leaky']] as const) {
    test(`${name}: 300 requests round robin over 3 nodes, 30 in flight, unpaced, three sources in turn`, async () => {
      for (const n of nodes) await until('3 live nodes', async () => /^Nodes: 3$/m.test(await sock(n.sock, 'show cluster')))
      const failures: string[] = []
      for (let k = 0; k < 3; k++) {
        const start = Date.now()
        const rs = await burst(nodes, 300, 30, next(), path)
        try {
          console.log(check(rs, Date.now() - start, `${name} round robin ${k}`))
        } catch (err) {
          failures.push((err as Error).message)
        }
      }
      assert.deepEqual(failures, [])
    })

    test(`${name}: 300 requests to one node, 30 in flight, unpaced; far fewer Redis calls than requests`, async () => {
      const redis = f.redis.client()
      const before = await scriptCalls(redis)
      const start = Date.now()
      const rs = await burst([nodes[1]!], 300, 30, next(), path)
      const ms = Date.now() - start
      const calls = await scriptCalls(redis) - before
      console.log(`${check(rs, ms, `${name} one node`)}, ${calls} script calls from the 3 nodes`)
      // a lease round per chunk (9) of the 100 admitted, plus every node's rounds every 100 ms and heartbeats
      assert.ok(calls < 12 + 3 * Math.ceil(ms / 100) * 2 + 10, `${calls} script calls in ${ms} ms`)
    })

    test(`${name}: 300 requests round robin, paced over 0.9 s and over 2 s`, async () => {
      for (const gap of [3, 7]) {
        const start = Date.now()
        const { replies } = await spread(nodes, 300, gap, next(), path)
        console.log(check(replies, Date.now() - start, `${name} paced every ${gap} ms`))
      }
    })
  }
})
