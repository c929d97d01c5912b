// Redis Sentinel: a real primary, a real replica and three real
// redis-sentinel processes (quorum 2), three real lb nodes configured with
// `sentinels` and `master_name`. The primary is SIGKILLed under steady
// traffic: the sentinels promote the replica, every node follows it without a
// restart, no request fails and none is refused (the traffic stays under the
// limit and under each node's share), and the cluster-wide limit holds on the
// new primary.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Redis } from 'ioredis'
import { type AdminLb, sock } from '../admin/util.js'
import { type Backend, type Reply, request, sleep, startBackend } from '../helpers.js'
import { type RedisServer, redisBinary, sentinelBinary, startRedis, startSentinel } from './redis.js'
import { metric, ok, spread, startNode, until } from './nodes.js'

const MASTER = 'lbm'

/** One command on a throwaway connection to 127.0.0.1:port. */
async function ask (port: number, ...args: string[]): Promise<unknown> {
  const c = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  c.on('error', () => {})
  try {
    await c.connect()
    return await c.call(args[0]!, ...args.slice(1))
  } finally {
    c.disconnect()
  }
}

describe('cluster: Redis Sentinel failover under traffic', () => {
  const bin = sentinelBinary()
  let primary: RedisServer | null = null
  let replica: RedisServer | null = null
  const sentinels: RedisServer[] = []
  const nodes: AdminLb[] = []
  let backend: Backend | null = null
  before(async () => {
    if (bin === null) return
    const server = redisBinary()
    primary = await startRedis(server)
    replica = await startRedis(server, undefined, ['--replicaof', '127.0.0.1', String(primary.port)])
    await until('the replica in sync', async () => /master_link_status:up/.test(String(await ask(replica!.port, 'INFO', 'replication'))), 15_000)
    for (let i = 0; i < 3; i++) sentinels.push(await startSentinel(bin, primary.port, MASTER, 2, 500))
    // every sentinel knows the replica and the two other sentinels (hello messages, every 2 s)
    for (const s of sentinels) {
      await until('sentinels discover each other and the replica', async () =>
        (await ask(s.port, 'SENTINEL', 'REPLICAS', MASTER) as unknown[]).length === 1 && (await ask(s.port, 'SENTINEL', 'SENTINELS', MASTER) as unknown[]).length === 2, 20_000)
    }
    backend = await startBackend('web')
    const redis = `sentinels = [${sentinels.map((s) => `"redis://127.0.0.1:${s.port}"`).join(', ')}]\nmaster_name = "${MASTER}"`
    for (const name of ['a', 'b', 'c']) nodes.push(await startNode(backend, '', name, { redis }))
  })
  after(async () => {
    for (const n of nodes) await n.lb.stop()
    await backend?.close()
    for (const s of sentinels) await s.stop()
    await replica?.stop()
    await primary?.stop()
  })

  test('SIGKILL of the primary: every node follows the promoted replica; no failed request, no 429; the limit holds after', async (t) => {
    if (bin === null) {
      t.skip('redis-sentinel is not installed and the test command could not install it (apt-get install -y redis-sentinel as root)')
      return
    }
    for (const n of nodes) {
      await until('3 nodes on the primary', async () => {
        const out = await sock(n.sock, 'show cluster')
        return /^Nodes: 3$/m.test(out) && new RegExp(`^Redis_address: 127\\.0\\.0\\.1:${primary!.port}$`, 'm').test(out)
      })
    }
    assert.match(await sock(nodes[0]!.sock, 'show cluster'), new RegExp(`^Redis: sentinel ${MASTER} via 127\\.0\\.0\\.1:${sentinels[0]!.port},`, 'm'))
    // steady traffic from one source over the three nodes, about 7 requests a second: under the
    // limit (100 per 10 s) and under each node's share while Redis is gone (34 per 10 s)
    const replies: Reply[] = []
    let stop = false
    const traffic = (async () => {
      for (let i = 0; !stop; i++) {
        replies.push(await request(`${nodes[i % 3]!.lb.url}/limited`, { localAddress: '127.0.0.61' }).catch((err: Error) => ({ status: 0, headers: {}, body: err.message })))
        await sleep(150)
      }
    })()
    let failoverMs = 0
    try {
      await sleep(1000)
      const killed = Date.now()
      await primary!.kill()
      for (const n of nodes) {
        await until('every node on the promoted replica', async () =>
          new RegExp(`^Redis_address: 127\\.0\\.0\\.1:${replica!.port}$`, 'm').test(await sock(n.sock, 'show cluster')) && await metric(n, 'lb_cluster_redis_up') === 1, 30_000)
      }
      failoverMs = Date.now() - killed
      await sleep(1000)
    } finally {
      stop = true
      await traffic
    }
    t.diagnostic(`every node on the new primary ${failoverMs} ms after the SIGKILL; ${replies.length} requests`)
    assert.ok(replies.length >= 15, `${replies.length} requests`)
    assert.deepEqual(replies.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.body.slice(0, 80)}`), [], 'no failed request and no 429 through the failover')
    // the new primary carries the cluster's counts: a burst spread over the nodes gets the cluster's 100
    const burst = (await spread(nodes, 150, 20, '127.0.0.62')).replies
    const admitted = ok(burst)
    assert.ok(admitted >= 95 && admitted <= 105, `admitted ${admitted} on the new primary, expected 100 ±5`)
  })
})
