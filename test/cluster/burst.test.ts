// Bursts against a cluster-scope limit (#38): three real lb nodes (2 workers
// each) on one real redis-server, 100 requests per 10 s. A source's requests
// arrive unpaced, 30 in flight, faster than one sync interval can follow; the
// cluster must admit the limit within 5% (at most 105) and refuse no more than
// the limit requires (at least 95), whatever the arrival pattern.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { sock } from '../admin/util.js'
import type { Reply } from '../helpers.js'
import { burst, clusterFixture, ok, scriptCalls, spread, until } from './nodes.js'

function check (rs: Reply[], what: string): number {
  assert.deepEqual(rs.filter((r) => r.status !== 200 && r.status !== 429).map((r) => `${r.status} ${r.body.slice(0, 80)}`), [], `${what}: only 200 and 429`)
  const admitted = ok(rs)
  assert.ok(admitted <= 105, `${what}: admitted ${admitted}, more than 5% over the limit of 100`)
  assert.ok(admitted >= 95, `${what}: admitted ${admitted}, ${100 - admitted} false 429s`)
  return admitted
}

describe('cluster: bursts over the nodes admit the limit within 5%', () => {
  const f = clusterFixture()
  const nodes = f.nodes
  const seen: string[] = []

  test('300 requests round robin over 3 nodes, 30 in flight, unpaced, five sources in turn', async () => {
    for (const n of nodes) await until('3 live nodes', async () => /^Nodes: 3$/m.test(await sock(n.sock, 'show cluster')))
    const failures: string[] = []
    for (let k = 0; k < 5; k++) {
      const from = `127.0.0.${61 + k}`
      const start = Date.now()
      const rs = await burst(nodes, 300, 30, from)
      const ms = Date.now() - start
      try {
        seen.push(`round robin ${from}: ${check(rs, `burst ${k}`)} in ${ms} ms`)
      } catch (err) {
        failures.push(`${(err as Error).message} (${ms} ms)`)
      }
    }
    console.log(seen.join('\n'))
    assert.deepEqual(failures, [])
  })

  test('300 requests to one node, 30 in flight, unpaced; far fewer Redis calls than requests', async () => {
    const redis = f.redis.client()
    const before = await scriptCalls(redis)
    const start = Date.now()
    const rs = await burst([nodes[1]!], 300, 30, '127.0.0.71')
    const ms = Date.now() - start
    const calls = await scriptCalls(redis) - before
    console.log(`one node: ${check(rs, 'one node')} in ${ms} ms, ${calls} script calls from the 3 nodes`)
    // a lease round per chunk (9) of the 100 admitted, plus every node's rounds every 100 ms and heartbeats
    assert.ok(calls < 12 + 3 * Math.ceil(ms / 100) * 2 + 10, `${calls} script calls in ${ms} ms`)
  })

  test('300 requests round robin, paced over 0.9 s and over 2 s', async () => {
    for (const [gap, from] of [[3, '127.0.0.72'], [7, '127.0.0.73']] as const) {
      const { replies, ms } = await spread(nodes, 300, gap, from)
      console.log(`paced over ${ms} ms: ${check(replies, `paced over ${ms} ms`)}`)
    }
  })
})
