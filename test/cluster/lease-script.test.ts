// The RATE_LEASE script (core/cluster/scripts.ts) on a real redis-server: the
// leases of one source never sum past its limit, however the nodes ask, and a
// node always keeps its floor (what it may already have admitted under).
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Redis } from 'ioredis'
import { RATE_LEASE, runScript } from '../../core/cluster/scripts.js'
import { type RedisServer, redisBinary, startRedis } from './redis.js'

const STALE_MS = 3000
const KEY = 'lb:rl:test'

/** One node's ask for KEY: [grant, the other nodes' estimates]. */
async function ask (r: Redis, node: string, floor: number, want: number, est: number, limit = 100): Promise<[number, number]> {
  return await runScript(r, RATE_LEASE, [KEY], [node, STALE_MS, floor, want, est, limit, 20_000]) as [number, number]
}

describe('cluster: the lease script', () => {
  let server: RedisServer | null = null
  let r: Redis
  before(async () => {
    server = await startRedis(redisBinary())
    r = server.client()
  })
  after(async () => { await server?.stop() })

  test('grants what the others leave, never less than the floor, and gives back on a smaller want', async () => {
    await r.del(KEY)
    assert.deepEqual(await ask(r, 'a', 0, 40, 0), [40, 0])
    assert.deepEqual(await ask(r, 'b', 0, 50, 3), [50, 0])
    // c asks 30 with 10 left: gets 10
    assert.deepEqual(await ask(r, 'c', 0, 30, 0), [10, 3])
    // a keeps its floor of 40 although nothing is left
    assert.deepEqual(await ask(r, 'a', 40, 60, 40), [40, 3])
    // b gives back 20 (its want falls to its estimate); c then gets them
    assert.deepEqual(await ask(r, 'b', 30, 30, 30), [30, 40])
    assert.deepEqual(await ask(r, 'c', 10, 40, 10), [30, 70])
    // stored as "<lease>:<estimate>:<ms it goes stale>"
    assert.match(await r.hget(KEY, 'c') ?? '', /^30:10:\d+$/)
  })

  test('three nodes asking at random, in any order: the leases never sum past the limit', async () => {
    await r.del(KEY)
    const held = new Map<string, number>([['a', 0], ['b', 0], ['c', 0]])
    for (let i = 0; i < 300; i++) {
      const node = ['a', 'b', 'c'][i % 3]!
      const lease = held.get(node)!
      const want = Math.floor(Math.random() * 60)
      const floor = Math.min(want, lease)
      const [grant] = await ask(r, node, floor, want, floor)
      assert.ok(grant >= floor, `grant ${grant} under the floor ${floor}`)
      held.set(node, grant)
      const sum = [...held.values()].reduce((x, y) => x + y, 0)
      assert.ok(sum <= 100, `leases sum to ${sum} after ${node} asked ${want} (floor ${floor})`)
    }
  })
})
