// The RATE_LEASE and BUCKET_LEASE scripts (core/cluster/scripts.ts) on a real
// redis-server: the leases of one source never sum past its limit (a bucket's:
// neither its capacity nor its rate), however the nodes ask, and a node always
// keeps its floor (what it may already have admitted under).
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Redis } from 'ioredis'
import { BUCKET_LEASE, RATE_LEASE, runScript } from '../../core/cluster/scripts.js'
import { type RedisServer, redisBinary, startRedis } from './redis.js'

const STALE_MS = 3000
const KEY = 'lb:rl:test'

/** One node's ask for KEY: [grant, the other nodes' estimates]. */
async function ask (r: Redis, node: string, floor: number, want: number, est: number, limit = 100): Promise<[number, number]> {
  return await runScript(r, RATE_LEASE, [KEY], [node, STALE_MS, floor, want, est, limit, 20_000]) as [number, number]
}

/** One node's bucket ask for KEY (capacity 100 requests, in units): [capacity, rate, the other nodes' levels]. */
async function askBucket (r: Redis, node: string, floor: number, want: number, level: number, rateFloor: number): Promise<[number, number, number]> {
  return await runScript(r, BUCKET_LEASE, [KEY], [node, STALE_MS, floor, want, level, 100_000, rateFloor, 20_000]) as [number, number, number]
}

const PARTS = 1_000_000

describe('cluster: the lease scripts', () => {
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

  test('buckets: capacity as the limit of a window; the rate by the part of the level of each node, never more than the others leave', async () => {
    await r.del(KEY)
    // a alone with a level: its whole capacity ask and the whole rate
    assert.deepEqual(await askBucket(r, 'a', 0, 40_000, 30_000, 0), [40_000, PARTS, 0])
    // b with the same level: half the rate is its part, but a holds it all until it gives back
    assert.deepEqual(await askBucket(r, 'b', 0, 70_000, 30_000, 0), [60_000, 0, 30_000])
    // a lowers to its part (its floor) first; b then gets the half a left
    assert.deepEqual(await askBucket(r, 'a', 40_000, 40_000, 30_000, PARTS / 2), [40_000, PARTS / 2, 30_000])
    assert.deepEqual(await askBucket(r, 'b', 60_000, 60_000, 30_000, 0), [60_000, PARTS / 2, 30_000])
    // c with nothing left: no capacity, no rate, both floors kept by the others
    assert.deepEqual(await askBucket(r, 'c', 0, 9_000, 0, 0), [0, 0, 60_000])
    // idle b gives back its capacity above its level and its rate: c gets them
    assert.deepEqual(await askBucket(r, 'b', 0, 0, 0, 0), [0, 0, 30_000])
    assert.deepEqual(await askBucket(r, 'c', 0, 9_000, 1_000, 0), [9_000, Math.floor(PARTS / 31), 30_000])
    // stored as "<capacity>:<rate>:<level>:<ms it goes stale>"
    assert.match(await r.hget(KEY, 'c') ?? '', /^9000:32258:1000:\d+$/)
  })

  test('buckets: three nodes asking at random: neither capacity nor rate leases ever sum past the bucket', async () => {
    await r.del(KEY)
    const held = new Map<string, [number, number]>([['a', [0, 0]], ['b', [0, 0]], ['c', [0, 0]]])
    for (let i = 0; i < 300; i++) {
      const node = ['a', 'b', 'c'][i % 3]!
      const [cap, rate] = held.get(node)!
      const want = Math.floor(Math.random() * 60_000)
      const floor = Math.min(want, cap)
      const rateFloor = Math.floor(Math.random() * (rate + 1))
      const [grant, granted] = await askBucket(r, node, floor, want, Math.floor(Math.random() * (floor + 1)), rateFloor)
      assert.ok(grant >= floor && granted >= rateFloor, `grant ${grant}, ${granted} under the floors ${floor}, ${rateFloor}`)
      held.set(node, [grant, granted])
      const caps = [...held.values()].reduce((x, y) => x + y[0], 0)
      const rates = [...held.values()].reduce((x, y) => x + y[1], 0)
      assert.ok(caps <= 100_000, `capacity leases sum to ${caps} after ${node} asked ${want} (floor ${floor})`)
      assert.ok(rates <= PARTS, `rate leases sum to ${rates} after ${node} asked (floor ${rateFloor})`)
    }
  })
})
