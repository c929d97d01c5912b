// When Redis is "down", with a real redis-server and three real lb nodes on
// the default max_wait (50 ms): a Redis that answers single commands late
// (DEBUG SLEEP on another connection, the busy host of issue 38) is counted
// in the metrics and never judged down; a Redis frozen for longer (SIGSTOP)
// is judged down once and up once on every node. While it is down, a limit
// with failure_mode = "closed" answers 503 and an open one (the default)
// passes on each node's share.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { type Reply, request, sleep } from '../helpers.js'
import { clusterFixture, metric, until } from './nodes.js'
import type { AdminLb } from '../admin/util.js'

/** A second limit, on /closed, that fails closed; 1000 per 10 s: never reached by these tests' traffic. */
const CLOSED = `[routers.closed]
rule = "PathPrefix(\`/closed\`)"
service = "web"
middlewares = ["closed"]

[middlewares.closed]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 1000
period = "10s"
scope = "cluster"
failure_mode = "closed"
`

/** Requests from `from` to `path`, round robin over the nodes every `gapMs`, until stop(): every reply. */
function traffic (nodes: AdminLb[], path: string, from: string, gapMs: number): { replies: Reply[], stop: () => Promise<void> } {
  const replies: Reply[] = []
  let stopped = false
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      replies.push(await request(`${nodes[i % nodes.length]!.lb.url}${path}`, { localAddress: from }).catch((err: Error) => ({ status: 0, headers: {}, body: err.message })))
      await sleep(gapMs)
    }
  })()
  return { replies, stop: async () => { stopped = true; await loop } }
}

const statuses = (rs: Reply[]): Record<number, number> => {
  const out: Record<number, number> = {}
  for (const r of rs) out[r.status] = (out[r.status] ?? 0) + 1
  return out
}

describe('cluster: Redis judged down from several failed commands, not one slow reply', () => {
  const f = clusterFixture({ cluster: 'max_wait = "50ms"', extra: CLOSED, redisArgs: ['--enable-debug-command', 'yes'] })
  const nodes = f.nodes

  // A stall of 100 ms: what issue 38 saw on a busy host (answers 30-50 ms after max_wait). Down takes three
  // separate failures of 50 ms each, so only a stall longer than 150 ms can be judged down; a 150 ms DEBUG SLEEP sat
  // on that bound and, on a loaded CI host that made it longer, was (correctly) judged down.
  test('five single slow replies (DEBUG SLEEP 100 ms): counted, never "unreachable", the closed limit never refuses', async () => {
    for (const n of nodes) await until('Redis up', async () => await metric(n, 'lb_cluster_redis_up') === 1)
    const logged = nodes.map((n) => n.lb.log().length)
    const slowBefore = await Promise.all(nodes.map((n) => metric(n, 'lb_cluster_redis_slow_replies_total')))
    const t = traffic(nodes, '/closed', '127.0.0.51', 20)
    const sleeper = f.redis.client()
    try {
      // A command is slow when sent in the first 50 ms of a stall, and each node syncs every 100 ms: stalls a
      // multiple of 100 ms apart would meet a node at one phase of its cycle, perhaps always the late half.
      // 820 ms apart, the phase walks 20 ms a stall, and any 50 ms window of the cycle holds two of the five.
      for (let i = 0; i < 5; i++) {
        await sleep(720)
        await sleeper.call('DEBUG', 'SLEEP', '0.1')
      }
      await sleep(500)
    } finally {
      await t.stop()
    }
    let slow = 0
    for (const [i, n] of nodes.entries()) {
      slow += await metric(n, 'lb_cluster_redis_slow_replies_total') - slowBefore[i]!
      assert.equal(await metric(n, 'lb_cluster_redis_transitions_total{to="down"}'), 0, `node ${i} judged Redis down`)
      assert.doesNotMatch(n.lb.log().slice(logged[i]), /Redis unreachable/, `node ${i} logged an outage`)
      assert.equal(await metric(n, 'lb_cluster_redis_up'), 1)
    }
    // the stalls did reach lb: commands in flight during a sleep got no answer within 50 ms
    assert.ok(slow >= 1, `${slow} slow replies counted over the nodes`)
    assert.ok(t.replies.length > 50, `${t.replies.length} requests`)
    assert.deepEqual(statuses(t.replies), { 200: t.replies.length }, 'every request passed, the fail-closed limit included')
  })

  test('Redis frozen 2 s (SIGSTOP): down once and up once on every node; closed limit 503 meanwhile, open one passes', async () => {
    const logged = nodes.map((n) => n.lb.log().length)
    const closed = traffic(nodes, '/closed', '127.0.0.52', 20)
    const open = traffic(nodes, '/limited', '127.0.0.53', 100)
    try {
      await sleep(300)
      f.redis.pause()
      for (const n of nodes) await until('lb_cluster_redis_up 0', async () => await metric(n, 'lb_cluster_redis_up') === 0, 5000)
      await sleep(1500)
      f.redis.resume()
      for (const n of nodes) await until('lb_cluster_redis_up 1', async () => await metric(n, 'lb_cluster_redis_up') === 1, 5000)
      await sleep(500)
    } finally {
      f.redis.resume()
      await closed.stop()
      await open.stop()
    }
    for (const [i, n] of nodes.entries()) {
      const log = n.lb.log().slice(logged[i])
      assert.equal(log.match(/Redis unreachable/g)?.length, 1, `node ${i}: one line for the outage`)
      assert.equal(log.match(/Redis reachable/g)?.length, 1, `node ${i}: one line for the return`)
      assert.match(log, /"level":"error","msg":"cluster: Redis unreachable[^\n]*"failed_in_a_row":3/)
      assert.equal(await metric(n, 'lb_cluster_redis_transitions_total{to="down"}'), 1)
      assert.equal(await metric(n, 'lb_cluster_redis_transitions_total{to="up"}'), 1)
    }
    // the fail-closed limit refused while Redis was down, and passed before and after
    const refused = closed.replies.filter((r) => r.status === 503)
    assert.ok(refused.length >= 5, JSON.stringify(statuses(closed.replies)))
    assert.equal(refused[0]!.headers['retry-after'], '1')
    assert.match(refused[0]!.body, /^rate limit closed cannot count this request: the cluster's Redis is unreachable/)
    assert.equal(closed.replies[0]!.status, 200)
    assert.equal(closed.replies.at(-1)!.status, 200)
    assert.deepEqual(Object.keys(statuses(closed.replies)).sort(), ['200', '503'])
    let unavailable = 0
    for (const n of nodes) unavailable += await metric(n, 'lb_cluster_ratelimit_unavailable_total')
    assert.equal(unavailable, refused.length)
    // the default (failure_mode = "open") passed everything on each node's share
    assert.deepEqual(statuses(open.replies), { 200: open.replies.length })
  })
})

describe('cluster: a request waiting for a lease when Redis freezes waits until Redis is judged down, not a count of rounds', () => {
  // fall = 6: Redis is judged down after six separate failed commands of max_wait (50 ms) each, at least 300 ms,
  // while four failed lease rounds take about 200 ms (the bound this replaced, which refused here with a 429)
  const f = clusterFixture({ names: ['solo'], cluster: 'max_wait = "50ms"\nfall = 6' })

  test('a source with no lease yet, its first request sent as Redis stops: decided on the local share (200), not refused', async () => {
    const [n] = f.nodes
    await until('Redis up', async () => await metric(n!, 'lb_cluster_redis_up') === 1)
    f.redis.pause()
    try {
      const started = Date.now()
      const r = await request(`${n!.lb.url}/limited`, { localAddress: '127.0.0.61' })
      assert.equal(r.status, 200, `after ${Date.now() - started} ms: ${r.body}`)
      assert.equal(await metric(n!, 'lb_cluster_redis_up'), 0, 'decided once Redis was judged down')
      assert.ok(Date.now() - started < 1000, 'within the wait of 1 s')
    } finally {
      f.redis.resume()
    }
    await until('Redis up again', async () => await metric(n!, 'lb_cluster_redis_up') === 1, 5000)
  })
})
