// Token budgets of the generation service (#36 point 3), through the real
// balancer with two data-plane workers and the official clients: requests per
// minute and tokens per minute run out with a 429 and Retry-After in each API's
// shape, requests in flight are capped, and a budget holds across the workers
// (many concurrent requests over separate connections: exactly the budget is
// admitted, since the one generation service counts for every worker).
//
// Windows are UTC minutes: a test that counts within one first waits for the
// next minute when less than 20 s of this one are left (its requests take well
// under a second each), so that its counts all fall in one window.

import assert from 'node:assert/strict'
import http from 'node:http'
import { after, before, describe, test } from 'node:test'
import { Ollama } from 'ollama'
import OpenAI from 'openai'
import { tokenHash } from '../../core/auth/token-digest.js'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { llamaGgufBytes } from '../../core/gen/models/llama-gguf.js'
import { type Lb, request, startLb, tempDir, waitFor } from '../helpers.js'
import { gatewayConfig, STORIES, withinOneMinute } from './helpers.js'

const KEY = {
  rpm: 'lb-rpm-key-0123456789abcdefghij',
  tpm: 'lb-tpm-key-0123456789abcdefghij',
  inFlight: 'lb-inflight-0123456789abcdefghij',
  shared: 'lb-shared-key-0123456789abcdefgh',
}
const SHARED_RPM = 12

/** A model that almost never ends a reply by itself: a long stream stays in flight for as long as the test needs. */
function writeEndless (): string {
  const file = join(tempDir(), 'endless.gguf')
  writeFileSync(file, llamaGgufBytes({ name: 'endless', embd: 16, ff: 32, heads: 2, blocks: 1, ctx: 4096, type: 'f32', eosFreq: 0.0001 }))
  return file
}

const config = (endless: string): string => gatewayConfig({ stories: STORIES, endless }, `
[[generation.keys]]
consumer = "rpm3"
hash = "${tokenHash(KEY.rpm)}"
rpm = 3
[[generation.keys]]
consumer = "tpm20"
hash = "${tokenHash(KEY.tpm)}"
tpm = 20
[[generation.keys]]
consumer = "one-at-a-time"
hash = "${tokenHash(KEY.inFlight)}"
max_in_flight = 1
[[generation.keys]]
consumer = "shared"
hash = "${tokenHash(KEY.shared)}"
rpm = ${SHARED_RPM}
`)

const openai = (lb: Lb, key: string): OpenAI => new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: key, maxRetries: 0 })
const ollama = (lb: Lb, key: string): Ollama => new Ollama({ host: lb.url, headers: { Authorization: `Bearer ${key}` } })
const msg = [{ role: 'user' as const, content: 'Hello' }]

/** A 429 of the openai client: RateLimitError with OpenAI's code and a Retry-After of 1 to 60 s; its message. */
function isRateLimited (e: unknown, why: RegExp): boolean {
  if (!(e instanceof OpenAI.RateLimitError)) return false
  const after = Number(e.headers?.get('retry-after'))
  return e.code === 'rate_limit_exceeded' && e.type === 'rate_limit_error' && after >= 1 && after <= 60 && why.test(e.message)
}

/** A POST over its own connection (no keep-alive): each may land on either data-plane worker. */
function postAlone (url: string, key: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close' } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end(body)
  })
}

describe('generation budgets through lb (two workers)', () => {
  let lb: Lb
  before(async () => { lb = await startLb(config(writeEndless()), { workers: 2 }) })
  after(() => lb.stop())

  test('rpm: the 4th request of a minute gets 429 with Retry-After, in OpenAI\'s and Ollama\'s shape', async () => {
    await withinOneMinute(async () => {
      const client = openai(lb, KEY.rpm)
      for (let i = 0; i < 3; i++) await client.chat.completions.create({ model: 'stories', messages: msg, max_tokens: 1 })
      await assert.rejects(client.chat.completions.create({ model: 'stories', messages: msg, max_tokens: 1 }),
        (e: unknown) => isRateLimited(e, /consumer rpm3 is over its limit of rpm = 3 requests per minute \(3 used\)/))
      const raw = await request(`${lb.url}/api/generate`, { method: 'POST', headers: { authorization: `Bearer ${KEY.rpm}` }, body: '{"model":"stories","prompt":"Hi"}' })
      assert.equal(raw.status, 429)
      assert.ok(Number(raw.headers['retry-after']) >= 1 && Number(raw.headers['retry-after']) <= 60, 'Retry-After in seconds to the minute\'s end')
      assert.match(JSON.parse(raw.body).error, /^consumer rpm3 is over its limit of rpm = 3/)
      await assert.rejects(ollama(lb, KEY.rpm).chat({ model: 'stories', messages: msg, stream: false }),
        (e: unknown) => (e as { status_code?: number }).status_code === 429)
    })
  })

  test('tpm: once a request used the minute\'s tokens (prompt + completion, from the reply), the next gets 429', async () => {
    await withinOneMinute(async () => {
      const client = openai(lb, KEY.tpm)
      const r = await client.chat.completions.create({ model: 'stories', messages: msg, max_tokens: 24 })
      assert.ok(r.usage!.total_tokens >= 20, `one request uses the budget (${r.usage!.total_tokens} tokens)`)
      await assert.rejects(client.chat.completions.create({ model: 'stories', messages: msg, max_tokens: 1 }),
        (e: unknown) => isRateLimited(e, new RegExp(`tpm = 20 tokens per minute \\(${r.usage!.total_tokens} used\\)`)))
      await assert.rejects(client.embeddings.create({ model: 'stories', input: 'x' }), OpenAI.RateLimitError)
      await assert.rejects(ollama(lb, KEY.tpm).generate({ model: 'stories', prompt: 'Hi', stream: false }),
        (e: unknown) => (e as { status_code?: number, error?: string }).status_code === 429 && /tpm = 20/.test((e as { error: string }).error))
    })
  })

  test('max_in_flight: a second request while one streams gets 429; once its client leaves, one is admitted again', async () => {
    const client = openai(lb, KEY.inFlight)
    const stream = await client.chat.completions.create({ model: 'endless', messages: msg, max_tokens: 3000, stream: true })
    const it = stream[Symbol.asyncIterator]()
    await it.next() // the first chunk: the request runs
    const second = await request(`${lb.url}/v1/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY.inFlight}`, 'content-type': 'application/json' }, body: '{"model":"stories","prompt":"Hi","max_tokens":1}' })
    assert.equal(second.status, 429)
    assert.equal(second.headers['retry-after'], '1')
    assert.equal(JSON.parse(second.body).error.code, 'rate_limit_exceeded')
    assert.match(JSON.parse(second.body).error.message, /max_in_flight = 1 requests at once \(1 used\)/)
    stream.controller.abort() // the client leaves: its request is cancelled and no longer in flight
    await waitFor(async () => (await request(`${lb.url}/v1/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY.inFlight}`, 'content-type': 'application/json' }, body: '{"model":"stories","prompt":"Hi","max_tokens":1}' })).status === 200,
      'a request admitted after the first one was cancelled', 10_000, 100)
  })

  test(`rpm across both workers: of 40 concurrent requests on separate connections, exactly ${SHARED_RPM} are admitted`, async () => {
    await withinOneMinute(async () => {
      const statuses = await Promise.all(Array.from({ length: 40 }, () =>
        postAlone(`${lb.url}/v1/chat/completions`, KEY.shared, '{"model":"stories","messages":[{"role":"user","content":"Hi"}],"max_tokens":1}')))
      assert.equal(statuses.filter((s) => s === 200).length, SHARED_RPM, `statuses: ${statuses.join(' ')}`)
      assert.equal(statuses.filter((s) => s === 429).length, 40 - SHARED_RPM)
    })
    const metrics = (await request(`http://127.0.0.1:${await lb.portOf('dashboard')}/metrics`)).body
    assert.match(metrics, new RegExp(`^lb_gen_consumer_rejections_total\\{consumer="shared",reason="rpm"\\} ${40 - SHARED_RPM}$`, 'm'))
    assert.match(metrics, /^lb_gen_consumer_rejections_total\{consumer="one-at-a-time",reason="in_flight"\} [1-9]\d*$/m)
    assert.match(metrics, /^lb_gen_consumer_rejections_total\{consumer="tpm20",reason="tpm"\} [1-9]/m)
    for (const k of Object.values(KEY)) assert.ok(!(metrics + lb.log() + lb.stdout()).includes(k), 'no key in metrics or logs')
  })
})
