// The BUDGET_LEASE script (core/gen/budget/lease-script.ts) on a real
// redis-server: a consumer's leases (rpm, tpm, tpd) never sum past its limits
// however the nodes ask, a node keeps its floor, a node's use beyond its lease
// counts against the others, and a stale node keeps its use but not its lease.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Redis } from 'ioredis'
import { runScript } from '../../core/cluster/scripts.js'
import { BUDGET_LEASE, dayKey, minuteKey } from '../../core/gen/budget/lease-script.js'
import { sleep } from '../helpers.js'
import { type RedisServer, redisBinary, startRedis } from '../cluster/redis.js'

const MINUTE = minuteKey('t:', 1, 'c')
const DAY = dayKey('t:', 1, 'c')

/** [limit, floor, want, used] of one limit; a limit of 0 has no lease. */
type Dim = [number, number, number, number]
const none: Dim = [0, 0, 0, 0]

/** One node's ask: [rpm grant, others' requests, tpm grant, others' tokens, tpd grant, others' day tokens]. */
async function ask (r: Redis, node: string, rpm: Dim, tpm: Dim = none, tpd: Dim = none, staleMs = 60_000): Promise<number[]> {
  return await runScript(r, BUDGET_LEASE, [MINUTE, DAY], [node, staleMs, ...rpm, ...tpm, ...tpd, 120_000, 120_000]) as number[]
}

describe('generation budgets: the lease script', () => {
  let server: RedisServer | null = null
  let r: Redis
  before(async () => {
    server = await startRedis(redisBinary())
    r = server.client()
  })
  after(async () => { await server?.stop() })

  test('requests: grants what the others leave, never less than the floor, and gives back on a smaller want', async () => {
    await r.del(MINUTE, DAY)
    assert.deepEqual((await ask(r, 'a', [20, 0, 15, 0])).slice(0, 2), [15, 0])
    // b asks 15 with 5 left: gets 5
    assert.deepEqual((await ask(r, 'b', [20, 0, 15, 0])).slice(0, 2), [5, 0])
    // a keeps its floor of 15 although nothing is left
    assert.deepEqual((await ask(r, 'a', [20, 15, 18, 12])).slice(0, 2), [15, 0])
    // a, idle, gives back to its use (12); b then gets 3 more
    assert.deepEqual((await ask(r, 'a', [20, 12, 12, 12])).slice(0, 2), [12, 0])
    assert.deepEqual((await ask(r, 'b', [20, 5, 10, 5])).slice(0, 2), [8, 12])
    // stored as "<rpm lease>:<requests>:<tpm lease>:<tokens>:<ms stale>", and the day's as "<tpd lease>:<tokens>:<ms stale>"
    assert.match(await r.hget(MINUTE, 'b') ?? '', /^8:5:0:0:\d+$/)
    assert.match(await r.hget(DAY, 'b') ?? '', /^0:0:\d+$/)
  })

  test('tokens: a node that used more than its lease holds its use; the day\'s lease is apart from the minute\'s', async () => {
    await r.del(MINUTE, DAY)
    assert.deepEqual(await ask(r, 'a', none, [30, 0, 20, 0], [100, 0, 20, 0]), [0, 0, 20, 0, 20, 0])
    assert.deepEqual(await ask(r, 'b', none, [30, 0, 10, 0], [100, 0, 10, 0]), [0, 0, 10, 0, 10, 0])
    // a's request reserved 29 on its lease of 20 (admitted under it): the minute has no room to cover it, the day has
    assert.deepEqual(await ask(r, 'a', none, [30, 20, 29, 29], [100, 20, 29, 29]), [0, 0, 20, 0, 29, 0])
    // so a holds 29 of the minute's 30 (its use): b keeps its floor and gets nothing more; of the day 100 - 29
    assert.deepEqual(await ask(r, 'b', none, [30, 10, 15, 10], [100, 10, 80, 10]), [0, 0, 10, 29, 71, 29])
  })

  test('a stale node keeps its use, not its lease', async () => {
    await r.del(MINUTE, DAY)
    assert.deepEqual((await ask(r, 'a', [20, 0, 15, 4], none, none, 50)).slice(0, 2), [15, 0])
    assert.deepEqual((await ask(r, 'b', [20, 0, 15, 0])).slice(0, 2), [5, 4])
    await sleep(100) // a's entry went stale (its stale time was 50 ms)
    // b now gets all but a's 4 requests
    assert.deepEqual((await ask(r, 'b', [20, 5, 20, 5])).slice(0, 2), [16, 4])
  })
})
