// Budgets across the nodes of a cluster (#36 point 3): two lb nodes, each with
// its own generation service, share a real Redis; each node admits a key's
// consumer on a lease granted in Redis out of what the other node's lease and
// use leave (core/gen/budget/lease.ts), so what a used on node a counts on b,
// a burst spread over both nodes is admitted within the limit (rpm, tpm) with
// its false 429s counted, an idle node's unused lease goes back to the other,
// and with Redis down each node counts alone. The bursts go to a model on a
// fake OpenAI-shaped server (test/gen/fake-openai.ts): 7 prompt + 3 completion
// tokens per request, fast.

import assert from 'node:assert/strict'
import { after, before, describe, type TestContext, test } from 'node:test'
import OpenAI from 'openai'
import { request } from 'undici'
import { tokenHash } from '../../core/auth/token-digest.js'
import { redisBinary, type RedisServer, startRedis } from '../cluster/redis.js'
import type { Redis } from 'ioredis'
import { type Lb, startLb, waitFor } from '../helpers.js'
import { type FakeOpenAi, startFakeOpenAi } from './fake-openai.js'
import { gatewayConfig, lbMetric, openaiServers, roomInMinute, STORIES, withinOneMinute } from './helpers.js'

const RPM_KEY = 'lb-cluster-rpm-0123456789abcdefg'
const TPM_KEY = 'lb-cluster-tpm-0123456789abcdefg'
const BURST_RPM_KEY = 'lb-cluster-burst-rpm-0123456789ab'
const BURST_TPM_KEY = 'lb-cluster-burst-tpm-0123456789ab'
const DOWN_KEY = 'lb-cluster-redis-down-0123456789a'
const ONE_NODE_KEY = 'lb-cluster-one-node-0123456789abc'
const GIVE_KEY = 'lb-cluster-give-back-0123456789ab'
const FROZEN_KEY = 'lb-cluster-frozen-0123456789abcde'
/** The bursts' limits: BURST_RPM requests per minute, BURST_TPM tokens per minute (100 requests of the fake's 10 tokens). */
const BURST_RPM = 60
const BURST_TPM = 1000
/** Tokens of one request to the fake: 7 prompt + 3 completion. */
const PER_REQUEST = 10

const nodeConfig = (redisUrl: string, node: string, fakeUrl: string): string => gatewayConfig({ stories: STORIES }, `
[[generation.servers]]
name = "fake"
kind = "openai"
url = "${fakeUrl}/v1"
[[generation.keys]]
consumer = "burst-rpm"
hash = "${tokenHash(BURST_RPM_KEY)}"
rpm = ${BURST_RPM}
[[generation.keys]]
consumer = "burst-tpm"
hash = "${tokenHash(BURST_TPM_KEY)}"
tpm = ${BURST_TPM}
[[generation.keys]]
consumer = "one-node"
hash = "${tokenHash(ONE_NODE_KEY)}"
rpm = ${BURST_RPM}
[[generation.keys]]
consumer = "give-back"
hash = "${tokenHash(GIVE_KEY)}"
rpm = 10
[[generation.keys]]
consumer = "down-rpm"
hash = "${tokenHash(DOWN_KEY)}"
rpm = 6
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

/** The status of a one-token completion of `model` on `lb` with `key`, and the error message of a refusal. */
async function complete (lb: Lb, key: string, model = 'stories'): Promise<{ status: number, message: string }> {
  const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: key, maxRetries: 0 })
  try {
    await client.completions.create({ model, prompt: 'Hi', max_tokens: 1 })
    return { status: 200, message: '' }
  } catch (e) {
    if (e instanceof OpenAI.APIError) return { status: e.status ?? 0, message: e.message }
    throw e
  }
}

/**
 * Waits until node a's lease round reported its use of `consumer`'s minute as `done` says (its field of the
 * minute's hash: "<rpm lease>:<requests>:<tpm lease>:<tokens>:<ms stale>"). Node b reads it at its next lease round.
 */
async function aReported (client: Redis, consumer: string, done: (requests: number, tokens: number) => boolean): Promise<void> {
  const key = `budget-test:gl:m:${Math.floor(Date.now() / 60_000)}:${consumer}`
  await waitFor(async () => {
    const v = await client.hget(key, 'a')
    if (v === null) return false
    const [, requests, , tokens] = v.split(':').map(Number)
    return done(requests!, tokens!)
  }, `node a's report of ${consumer}`)
}

describe('generation budgets across two cluster nodes', () => {
  let redis: RedisServer
  let client: Redis
  let a: Lb
  let b: Lb
  let fake: FakeOpenAi
  // the fake's own t.after, run by the suite's after
  const cleanups: Array<() => unknown> = []
  before(async () => {
    redis = await startRedis(redisBinary())
    client = redis.client()
    fake = await startFakeOpenAi({ after: (f: () => unknown) => cleanups.push(f) } as unknown as TestContext, ['remote-model'])
    a = await startLb(nodeConfig(redis.url, 'a', fake.url))
    b = await startLb(nodeConfig(redis.url, 'b', fake.url))
    await roomInMinute()
  })
  after(async () => {
    for (const f of cleanups) await f()
    client?.disconnect()
    await a?.stop()
    await b?.stop()
    await redis?.stop()
  })

  test('tokens used on node a count on node b: b refuses with tpm', async () => {
    const r = await new OpenAI({ baseURL: `${a.url}/v1`, apiKey: TPM_KEY, maxRetries: 0 })
      .chat.completions.create({ model: 'stories', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 24 })
    const used = r.usage!.total_tokens
    assert.ok(used >= 20)
    await aReported(client, 'tpm20', (_r, tokens) => tokens === used)
    const x = await complete(b, TPM_KEY)
    assert.equal(x.status, 429, 'b\'s first request of the consumer is refused')
    assert.match(x.message, new RegExp(`tpm = 20 tokens per minute \\(${used} used\\)`))
  })

  test('requests on node a count on node b: once a used rpm, b refuses too', async () => {
    for (let i = 0; i < 4; i++) assert.equal((await complete(a, RPM_KEY)).status, 200)
    assert.equal((await complete(a, RPM_KEY)).status, 429)
    await aReported(client, 'rpm4', (requests) => requests === 4)
    const x = await complete(b, RPM_KEY)
    assert.equal(x.status, 429, 'b\'s first request of the consumer is refused')
    assert.match(x.message, /consumer rpm4 is over its limit of rpm = 4 requests per minute \(4 used\)/)
    // what Redis holds: counts by node, never a key
    const keys = await client.keys('budget-test:gl:*')
    assert.ok(keys.some((k) => k.endsWith(':rpm4')), keys.join(' '))
    for (const k of keys) assert.ok(!k.includes(RPM_KEY) && !k.includes(TPM_KEY))
  })

  test(`a burst for one key spread over both nodes, both API shapes: at most rpm = ${BURST_RPM} admitted, few false 429s`, async (t) => {
    await withinOneMinute(async () => {
      const out = await burst([a, b], BURST_RPM_KEY, 200)
      report(t, 'rpm', out)
      assert.ok(out.admitted <= BURST_RPM * 1.05, `${out.admitted} admitted over ${BURST_RPM} rpm`)
      // false 429s: refusals while the minute still had room for them
      assert.ok(BURST_RPM - out.admitted <= BURST_RPM * 0.05, `${BURST_RPM - out.admitted} false 429s`)
      assert.equal(out.admitted + out.refused, 200, `other statuses: ${out.other.join(' ')}`)
    })
  })

  test(`a burst for one key spread over both nodes, both API shapes: at most tpm = ${BURST_TPM} tokens used (+5%), few false 429s`, async (t) => {
    await withinOneMinute(async () => {
      const out = await burst([a, b], BURST_TPM_KEY, 250)
      report(t, 'tpm', out)
      assert.equal(out.tokens, out.admitted * PER_REQUEST)
      assert.ok(out.tokens <= BURST_TPM * 1.05, `${out.tokens} tokens used over ${BURST_TPM} tpm`)
      // admitted while under: the ideal single counter admits ceil(tpm / tokens per request)
      const ideal = Math.ceil(BURST_TPM / PER_REQUEST)
      assert.ok(ideal - out.admitted <= ideal * 0.05, `${ideal - out.admitted} false 429s`)
      assert.equal(out.admitted + out.refused, 250, `other statuses: ${out.other.join(' ')}`)
    })
  })

  test(`a burst for one key on one node only: rpm = ${BURST_RPM} admitted, no false 429 (it takes its lease chunk by chunk)`, async (t) => {
    await withinOneMinute(async () => {
      const out = await burst([b], ONE_NODE_KEY, 200)
      report(t, 'rpm, one node', out)
      assert.equal(out.admitted, BURST_RPM)
      assert.equal(out.admitted + out.refused, 200, `other statuses: ${out.other.join(' ')}`)
    })
  })

  test('an idle node gives back its unused lease: the other node is then admitted up to the limit, no false 429', async () => {
    await withinOneMinute(async () => {
      const one = async (lb: Lb): Promise<number> => (await request(`${lb.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${GIVE_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'remote-model', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 3 }),
      })).statusCode
      assert.equal(await one(a), 200)
      // a's lease round asked a chunk (10 / (4 × 2) rounded up: 2) for its request; idle, it gives back the one it did not use
      const key = `budget-test:gl:m:${Math.floor(Date.now() / 60_000)}:give-back`
      await waitFor(async () => /^1:1:/.test(await client.hget(key, 'a') ?? ''), 'node a\'s lease back to its use')
      const statuses: number[] = []
      for (let i = 0; i < 10; i++) statuses.push(await one(b))
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 200, 429])
    })
  })

  // last: it kills Redis
  test('Redis down: each node counts alone (rpm = 6 on each node)', async () => {
    await redis.kill()
    for (const n of [a, b]) {
      const dash = `http://127.0.0.1:${await n.portOf('dashboard')}/metrics`
      await waitFor(async () => /^lb_cluster_redis_up 0$/m.test(await (await request(dash)).body.text()), 'Redis judged down', 10_000)
    }
    await withinOneMinute(async () => {
      for (const n of [a, b]) {
        const statuses: number[] = []
        for (let i = 0; i < 8; i++) {
          const r = await request(`${n.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${DOWN_KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'remote-model', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 3 }),
          })
          const j = await r.body.json() as any
          statuses.push(r.statusCode)
          if (r.statusCode === 429) assert.match(j.error.message, /is over its limit of rpm = 6 requests per minute \(6 used\)/)
        }
        assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 429, 429])
      }
    })
  })
})

interface BurstOutcome { admitted: number, refused: number, tokens: number, other: string[] }

/** Prints a burst's outcome (the run's figures for docs/cluster.md). */
function report (t: TestContext, what: string, o: BurstOutcome): void {
  t.diagnostic(`burst ${what}: ${o.admitted} admitted, ${o.refused} refused, ${o.tokens} tokens`)
}

/**
 * `n` requests with `key`, 30 in flight, unpaced, round robin over `nodes`, alternating OpenAI's chat and Ollama's
 * chat (each pair of requests one of each): what was admitted and the tokens their replies report. Every refusal
 * is a 429 with Retry-After in the caller's shape.
 */
async function burst (nodes: Lb[], key: string, n: number): Promise<BurstOutcome> {
  const o: BurstOutcome = { admitted: 0, refused: 0, tokens: 0, other: [] }
  let next = 0
  const one = async (i: number): Promise<void> => {
    const lb = nodes[i % nodes.length]!
    const openai = (i >> 1) % 2 === 0
    const messages = [{ role: 'user', content: 'Hello there, friend' }]
    const body = openai ? { model: 'remote-model', messages, max_tokens: 3 } : { model: 'remote-model', messages, stream: false, options: { num_predict: 3 } }
    const r = await request(`${lb.url}${openai ? '/v1/chat/completions' : '/api/chat'}`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    })
    const j = await r.body.json() as any
    if (r.statusCode === 200) {
      o.admitted++
      o.tokens += openai ? j.usage.total_tokens : j.prompt_eval_count + j.eval_count
    } else if (r.statusCode === 429) {
      o.refused++
      assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/)
      if (openai) assert.equal(j.error.code, 'rate_limit_exceeded')
      else assert.match(j.error, /is over its limit|holds the rest|share/)
    } else {
      o.other.push(`${r.statusCode} ${JSON.stringify(j)}`)
    }
  }
  await Promise.all(Array.from({ length: 30 }, async () => { while (next < n) await one(next++) }))
  return o
}

test('a key\'s first request on a node, sent as Redis freezes: decided on the node\'s counts once Redis is judged down, not refused on its empty lease', async (t) => {
  const redis = await startRedis(redisBinary())
  t.after(() => redis.stop())
  const fake = await startFakeOpenAi(t, ['remote-model'])
  // fall = 6: Redis is judged down after six separate failed commands of max_wait (50 ms) each, at least 300 ms,
  // while four failed lease rounds take about 200 ms (the bound this replaced, which refused here: HELD)
  const lb = await startLb(gatewayConfig({}, `${openaiServers({ fake: fake.url })}
[[generation.keys]]
consumer = "frozen"
hash = "${tokenHash(FROZEN_KEY)}"
rpm = 10

[cluster]
url = "${redis.url}"
node = "solo"
prefix = "budget-frozen:"
max_wait = "50ms"
fall = 6
`))
  t.after(() => lb.stop())
  await waitFor(async () => await lbMetric(lb, 'lb_cluster_redis_up') === 1 ? true : null, 'Redis judged up')
  redis.pause()
  try {
    const started = Date.now()
    const r = await complete(lb, FROZEN_KEY, 'remote-model')
    assert.equal(r.status, 200, `after ${Date.now() - started} ms: ${r.message}`)
    assert.equal(await lbMetric(lb, 'lb_cluster_redis_up'), 0, 'decided once Redis was judged down')
  } finally {
    redis.resume()
  }
})
