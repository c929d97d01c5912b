// Budgets across the nodes of a cluster (#36 point 3): two lb nodes, each with
// its own generation service, share a real Redis; a key's consumer is charged
// on one node what it used on the other once their services exchanged counts
// (every sync_interval: core/gen/budget/exchange.ts). The test sees in Redis
// when node b has run a whole round after node a reported (b's field, which
// the test removed, is back): from then on b charges what a used.

import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import OpenAI from 'openai'
import { tokenHash } from '../../core/auth/token-digest.js'
import { redisBinary, type RedisServer, startRedis } from '../cluster/redis.js'
import type { Redis } from 'ioredis'
import { type Lb, startLb, waitFor } from '../helpers.js'
import { gatewayConfig, roomInMinute, STORIES } from './helpers.js'

const RPM_KEY = 'lb-cluster-rpm-0123456789abcdefg'
const TPM_KEY = 'lb-cluster-tpm-0123456789abcdefg'

const nodeConfig = (redisUrl: string, node: string): string => gatewayConfig({ stories: STORIES }, `
[[generation.keys]]
consumer = "rpm4"
hash = "${tokenHash(RPM_KEY)}"
rpm = 4
[[generation.keys]]
consumer = "tpm20"
hash = "${tokenHash(TPM_KEY)}"
tpm = 20

[cluster]
url = "${redisUrl}"
node = "${node}"
prefix = "budget-test:"
sync_interval = "100ms"
node_ttl = "1500ms"
max_wait = "1s"
`)

/** The status of a one-token completion on `lb` with `key`, and the error message of a refusal. */
async function complete (lb: Lb, key: string): Promise<{ status: number, message: string }> {
  const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: key, maxRetries: 0 })
  try {
    await client.completions.create({ model: 'stories', prompt: 'Hi', max_tokens: 1 })
    return { status: 200, message: '' }
  } catch (e) {
    if (e instanceof OpenAI.APIError) return { status: e.status ?? 0, message: e.message }
    throw e
  }
}

/**
 * Waits until node a reported `consumer`'s counts of this minute as `done` says, then until node b ran a round
 * after that: b's own field is removed and waited for (b writes it, then reads every node's, in one pipeline).
 */
async function bHeardFromA (client: Redis, consumer: string, done: (fieldOfA: string) => boolean): Promise<void> {
  const key = `budget-test:gb:m:${Math.floor(Date.now() / 60_000)}:${consumer}`
  await waitFor(async () => { const v = await client.hget(key, 'a'); return v !== null && done(v) }, `node a's report of ${consumer}`)
  await client.hdel(key, 'b')
  await waitFor(async () => await client.hget(key, 'b') !== null, 'a round of node b')
}

describe('generation budgets across two cluster nodes', () => {
  let redis: RedisServer
  let client: Redis
  let a: Lb
  let b: Lb
  before(async () => {
    redis = await startRedis(redisBinary())
    client = redis.client()
    a = await startLb(nodeConfig(redis.url, 'a'))
    b = await startLb(nodeConfig(redis.url, 'b'))
    await roomInMinute()
  })
  after(async () => {
    client?.disconnect()
    await a?.stop()
    await b?.stop()
    await redis?.stop()
  })

  test('tokens used on node a count on node b: b refuses with tpm once it heard', async () => {
    const r = await new OpenAI({ baseURL: `${a.url}/v1`, apiKey: TPM_KEY, maxRetries: 0 })
      .chat.completions.create({ model: 'stories', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 24 })
    const used = r.usage!.total_tokens
    assert.ok(used >= 20)
    await bHeardFromA(client, 'tpm20', (v) => v === `1:${used}`)
    const x = await complete(b, TPM_KEY)
    assert.equal(x.status, 429, 'b\'s first request of the consumer is refused')
    assert.match(x.message, new RegExp(`tpm = 20 tokens per minute \\(${used} used\\)`))
  })

  test('requests on node a count on node b: once a used rpm, b refuses too', async () => {
    for (let i = 0; i < 4; i++) assert.equal((await complete(a, RPM_KEY)).status, 200)
    assert.equal((await complete(a, RPM_KEY)).status, 429)
    await bHeardFromA(client, 'rpm4', (v) => v.startsWith('4:'))
    const x = await complete(b, RPM_KEY)
    assert.equal(x.status, 429, 'b\'s first request of the consumer is refused')
    assert.match(x.message, /consumer rpm4 is over its limit of rpm = 4 requests per minute \(4 used\)/)
    // what Redis holds: counts by node, never a key
    const keys = await client.keys('budget-test:gb:*')
    assert.ok(keys.some((k) => k.endsWith(':rpm4')), keys.join(' '))
    for (const k of keys) assert.ok(!k.includes(RPM_KEY) && !k.includes(TPM_KEY))
  })
})
