// Cluster-wide rate limits and membership with a real redis-server and three
// real lb nodes (2 workers each): the limit holds over the nodes together,
// falls back to each node's share while Redis is gone and resumes by itself;
// a node that dies leaves the membership within its TTL.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { json, sock } from '../admin/util.js'
import { type Reply, request, sleep } from '../helpers.js'
import { clusterFixture, metric, ok, spread, until } from './nodes.js'

describe('cluster: rate limits and membership over Redis', () => {
  const f = clusterFixture()
  const nodes = f.nodes

  test('every node sees the three nodes: show cluster, /api/overview, /metrics', async () => {
    for (const n of nodes) await until('3 live nodes', async () => /^Nodes: 3$/m.test(await sock(n.sock, 'show cluster')))
    const out = await sock(nodes[0]!.sock, 'show cluster')
    assert.match(out, /^Node: a$/m)
    assert.match(out, /^Members: a b c$/m)
    assert.match(out, /^Redis_up: 1$/m)
    const o = await json(`${nodes[1]!.dash}/api/overview`) as { json: { cluster: { node: string, nodes: string[], redisUp: boolean } } }
    assert.equal(o.json.cluster.node, 'b')
    assert.deepEqual([...o.json.cluster.nodes].sort(), ['a', 'b', 'c'])
    assert.equal(o.json.cluster.redisUp, true)
    assert.equal(await metric(nodes[2]!, 'lb_cluster_nodes'), 3)
    assert.equal(await metric(nodes[2]!, 'lb_cluster_redis_up'), 1)
  })

  test('150 requests in 10 s spread evenly over 3 nodes against 100 per 10 s: 100 ±5 admitted', async () => {
    const rs = (await spread(nodes, 150, 66, '127.0.0.11')).replies
    assert.deepEqual(rs.filter((r) => r.status !== 200 && r.status !== 429), [], 'only 200 and 429')
    const admitted = ok(rs)
    assert.ok(admitted >= 95 && admitted <= 105, `admitted ${admitted}, expected 100 ±5`)
    // each node admitted a part: the limit is shared, not per node (3 × 100) nor held by one
    for (let i = 0; i < 3; i++) assert.ok(ok(rs.filter((_, j) => j % 3 === i)) < 60, `node ${i} admitted most`)
    let refused = 0
    for (const n of nodes) refused += await metric(n, 'lb_cluster_ratelimit_refusals_total{decided="cluster"}')
    assert.equal(refused, 150 - admitted)
  })

  test('Redis SIGKILLed under traffic: no failed request, each node on its share, then the cluster limit resumes', async () => {
    const r = f.redis
    // steady traffic from another source all along
    let stop = false
    const during: Reply[] = []
    const traffic = (async () => {
      for (let i = 0; !stop; i++) {
        // a failed connection is a reply of status 0, so the loop never throws
        during.push(await request(`${nodes[i % 3]!.lb.url}/`, { localAddress: '127.0.0.12' }).catch((err: Error) => ({ status: 0, headers: {}, body: err.message })))
        await sleep(10)
      }
    })()
    try {
      const logged = nodes.map((n) => n.lb.log().length)
      await r.kill()
      for (const n of nodes) await until('lb_cluster_redis_up 0', async () => await metric(n, 'lb_cluster_redis_up') === 0, 3000)
      for (const [i, n] of nodes.entries()) {
        await n.lb.logMatching(/Redis unreachable/)
        assert.equal(n.lb.log().slice(logged[i]).match(/Redis unreachable/g)?.length, 1, 'one log line for the outage')
      }
      // Redis down: a source sending 60 requests to node a alone gets a's share, ceil(100 / 3) = 34
      const alone = (await spread([nodes[0]!], 60, 5, '127.0.0.13')).replies
      assert.equal(ok(alone), 34)
      assert.ok(await metric(nodes[0]!, 'lb_cluster_ratelimit_refusals_total{decided="local"}') >= 26)
      await r.restart()
      for (const n of nodes) await until('lb_cluster_redis_up 1', async () => await metric(n, 'lb_cluster_redis_up') === 1, 5000)
      await nodes[0]!.lb.logMatching(/Redis reachable; cluster-wide rate limits apply[\s\S]*Redis unreachable[\s\S]*Redis reachable/)
      // back: a new source spread over the nodes gets the cluster's 100, not 3 × 34 nor 34
      const back = (await spread(nodes, 150, 20, '127.0.0.14')).replies
      const admitted = ok(back)
      assert.ok(admitted >= 95 && admitted <= 105, `admitted ${admitted} after Redis came back, expected 100 ±5`)
    } finally {
      // the traffic loop ends with the test, failed or not
      stop = true
      await traffic
    }
    assert.ok(during.length > 50, `${during.length} requests under traffic`)
    assert.deepEqual(during.filter((x) => x.status !== 200).map((x) => `${x.status} ${x.body.slice(0, 80)}`), [], 'no failed request while Redis was gone')
  })

  test('a node killed leaves the membership within its TTL', async () => {
    for (const n of nodes) await until('3 live nodes', async () => /^Nodes: 3$/m.test(await sock(n.sock, 'show cluster')))
    const killedAt = Date.now()
    await nodes[2]!.lb.stop('SIGKILL')
    await until('2 live nodes on a', async () => /^Members: a b$/m.test(await sock(nodes[0]!.sock, 'show cluster')), 4000)
    // node_ttl 1.5 s, plus at most one heartbeat period (ttl / 3) of the node that notices, plus
    // this machine's scheduling (a late timer, the script, the socket round trip)
    assert.ok(Date.now() - killedAt < 1500 + 500 + 1000, `left after ${Date.now() - killedAt} ms`)
    // and every other node, within its own next heartbeat
    await until('lb_cluster_nodes 2 on b', async () => await metric(nodes[1]!, 'lb_cluster_nodes') === 2, 1000)
  })
})
