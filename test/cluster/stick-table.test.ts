// A cluster-scope limit as a stick table, with two real lb nodes on one real
// redis-server: each node lists the sources it saw with its own count and the
// cluster's; `clear table <t> key <k>` on one node (runtime socket) and
// DELETE stick_table_entries on the other (config API) forget the source on
// every node and in Redis, so the client is unblocked wherever it goes.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { json, send, sock } from '../admin/util.js'
import { request, sleep } from '../helpers.js'
import { clusterFixture, until } from './nodes.js'
import type { AdminLb } from '../admin/util.js'

/** `n` requests from `from` to one node: their statuses. */
async function hits (n: AdminLb, from: string, count: number): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < count; i++) out.push((await request(`${n.lb.url}/limited`, { localAddress: from })).status)
  return out
}

/** [key, own count, cluster count] of each entry line of a `show table` reply. */
function rows (out: string): Array<[string, number, number]> {
  return [...out.matchAll(/^0x[0-9a-f]+: key=(\S+) use=0 exp=\d+ http_req_rate\(10000\)=(\d+) cluster_req_rate\(10000\)=(\d+)$/gm)].map((m) => [m[1]!, Number(m[2]), Number(m[3])])
}

describe('cluster: stick tables of a cluster-scope limit, cleared on every node', () => {
  const f = clusterFixture({ names: ['a', 'b'] })
  const nodes = f.nodes

  test('each node lists its sources with its count and the cluster\'s; one clear reaches both nodes and Redis', async () => {
    const [a, b] = [nodes[0]!, nodes[1]!]
    for (const n of nodes) await until('2 live nodes', async () => /^Nodes: 2$/m.test(await sock(n.sock, 'show cluster')))
    // .41: 60 on a, then (once a's idle round gave back the rest of its lease) 60 on b, against 100 per
    // 10 s over the cluster: b gets the 40 left; refusals are not counted while the nodes hold leases
    assert.deepEqual(await hits(a, '127.0.0.41', 60), new Array(60).fill(200))
    await sleep(300)
    const onB = await hits(b, '127.0.0.41', 60)
    assert.deepEqual(onB, [...new Array(40).fill(200), ...new Array(20).fill(429)])
    await hits(b, '127.0.0.42', 30)
    // after a sync each node knows the other's count of .41, and a refuses it: the cluster's 100 are out
    await until('the cluster counts synced', async () => rows(await sock(a.sock, 'show table rl'))[0]?.[2] === 100 && rows(await sock(b.sock, 'show table rl key 127.0.0.41'))[0]?.[2] === 100)
    assert.deepEqual(await hits(a, '127.0.0.41', 1), [429])
    assert.match(await sock(a.sock, 'show table'), /^# table: rl, type: ip, size:16384, used:1$/m)
    assert.deepEqual(rows(await sock(a.sock, 'show table rl')), [['127.0.0.41', 60, 100]])
    // b saw both sources: the top one first
    assert.deepEqual(rows(await sock(b.sock, 'show table rl')), [['127.0.0.41', 40, 100], ['127.0.0.42', 30, 30]])
    // a never saw .42: nothing there, as HAProxy for an absent key
    assert.equal(await sock(a.sock, 'show table rl key 127.0.0.42'), '\n')
    const redis = f.redis.client()
    assert.equal((await redis.keys('lb:rl:*')).length, 2)

    // clear .41 on a: both nodes forget it, and Redis too
    assert.equal(await sock(a.sock, 'clear table rl key 127.0.0.41'), '\n')
    await until('b forgot 127.0.0.41', async () => (await sock(b.sock, 'show table rl key 127.0.0.41')) === '\n', 5000)
    assert.equal(await sock(a.sock, 'show table rl key 127.0.0.41'), '\n')
    // a round of b's on its way may have put b's count back after the clear: b withdraws it at its next round
    await until('Redis forgot 127.0.0.41', async () => (await redis.keys('lb:rl:*')).length === 1, 5000)
    // unblocked on both nodes: it starts from 0, not from 100 (every request refused for the next 10 s without the clear)
    const again = [...await hits(a, '127.0.0.41', 10), ...await hits(b, '127.0.0.41', 10)]
    assert.deepEqual(again, new Array(20).fill(200))

    // the config API on b forgets .42 (which a never saw) in the same way
    const del = await send('DELETE', `${b.admin}/v2/services/lb/runtime/stick_table_entries?stick_table=rl&key=127.0.0.42`)
    assert.equal(del.status, 204, del.body)
    assert.deepEqual((await json(`${b.admin}/v2/services/lb/runtime/stick_table_entries?stick_table=rl&key=127.0.0.42`)).json, [])
    const entries = (await json(`${a.admin}/v2/services/lb/runtime/stick_table_entries?stick_table=rl`)).json as Array<Record<string, unknown>>
    assert.deepEqual(entries.map((e) => [e.key, e.http_req_rate]), [['127.0.0.41', 10]])
    assert.deepEqual((await json(`${a.admin}/v2/services/lb/runtime/stick_tables/rl`)).json,
      { name: 'rl', type: 'ip', size: 16384, used: 1, fields: [{ field: 'http_req_rate', type: 'rate', period: 10000 }, { field: 'cluster_req_rate', type: 'rate', period: 10000 }] })
  })
})
