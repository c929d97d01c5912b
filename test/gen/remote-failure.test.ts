// Remote model servers that fail: a server dying mid-stream (the stream ends
// with an error in the caller's shape, the server is skipped afterwards), an
// error event mid-stream, fallbacks tried before the first byte, what the
// client gets when nothing could serve it, and a client that disconnects
// (the server sees its request closed).

import assert from 'node:assert/strict'
import { once } from 'node:events'
import { test } from 'node:test'
import { Ollama } from 'ollama'
import OpenAI from 'openai'
import { assertFloodStalls, startFakeOpenAi, within } from './fake-openai.js'
import { waitFor } from '../helpers.js'
import { type Gen, get, lines, post, startGen, STORIES } from './helpers.js'

async function startFront (t: Parameters<typeof startGen>[0], servers: unknown[], extra: Record<string, unknown> = {}): Promise<Gen> {
  return await startGen(t, { models: {}, builtin_model: false, servers, ...extra })
}

test('a server killed mid-stream: the OpenAI stream ends with an error event, the next request goes to the other server', async (t) => {
  const dying = await startFakeOpenAi(t, ['stories'])
  const backup = await startGen(t, { builtin_model: false })
  // the openai-kind server serves what it lists (loaded), so it is preferred while it is up
  const front = await startFront(t, [
    { name: 'backup', kind: 'lb', url: backup.base, refresh: '10m' },
    { name: 'dying', kind: 'openai', url: dying.url, refresh: '10m' },
  ])
  // The backup's listing waits for its runner, which on a busy machine takes longer than the first refresh's
  // bound: it is retried every second. What is tested here starts once both servers are known.
  await waitFor(async () => (await get(front.base, '/api/tags')).json.models.some((m: { name: string }) => m.name.startsWith('random')), 'the backup listed', 30_000, 100)
  dying.mode = 'die'
  const openai = new OpenAI({ baseURL: `${front.base}/v1`, apiKey: 'none', maxRetries: 0 })
  let text = ''
  await assert.rejects(async () => {
    for await (const c of await openai.chat.completions.create({ model: 'stories', messages: [{ role: 'user', content: 'Hi' }], stream: true })) {
      text += c.choices[0]?.delta.content ?? ''
      dying.events.emit('go')
    }
  }, (e: unknown) => e instanceof OpenAI.APIError && /model server dying failed: the reply broke off/.test(e.message))
  assert.equal(text, 'Hello', 'what arrived before the server died was relayed')
  assert.equal(dying.bodies.length, 1)

  // were it asked again, it would answer: only being marked down keeps it out
  dying.mode = 'ok'
  const ollama = new Ollama({ host: front.base })
  const r = await ollama.generate({ model: 'stories', prompt: 'Once', options: { num_predict: 3 } })
  assert.equal(r.done, true)
  assert.equal(dying.bodies.length, 1, 'the dead server was skipped')
  assert.equal(backup.svc.stats().requests.generate.ok, 1)
  assert.equal(front.svc.stats().requests.chat.error, 1)
})

test('an error event mid-stream ends an Ollama stream with an error line', async (t) => {
  const fake = await startFakeOpenAi(t, ['m'])
  const front = await startFront(t, [{ name: 'f', kind: 'openai', url: fake.url }])
  fake.mode = 'error-event'
  const res = await fetch(`${front.base}/api/chat`, { method: 'POST', body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] }) })
  assert.equal(res.status, 200)
  let text = ''
  const decoder = new TextDecoder()
  for await (const chunk of res.body!) {
    text += decoder.decode(chunk, { stream: true })
    fake.events.emit('go')
  }
  const ls = lines(text)
  assert.equal(ls[0].message.content, 'Hello')
  assert.deepEqual(ls.at(-1), { error: 'model server f failed: fake broke mid-stream' })
})

test('fallbacks are tried before the first byte; without one the client gets 502, then 503 while the server is down', async (t) => {
  const failing = await startFakeOpenAi(t, ['big', 'lonely'])
  const small = await startGen(t, { models: { alpha: STORIES }, builtin_model: false })
  const front = await startFront(t, [
    { name: 'failing', kind: 'openai', url: failing.url, refresh: '10m' },
    { name: 'small', kind: 'lb', url: small.base, refresh: '10m' },
  ], { fallbacks: { big: ['alpha'] } })
  failing.mode = 'fail500'
  const ollama = new Ollama({ host: front.base })
  const r = await ollama.generate({ model: 'big', prompt: 'Once', options: { num_predict: 3 } })
  assert.equal(r.done, true)
  assert.equal(failing.bodies.length, 1, 'the model\'s server was asked first')
  assert.equal(small.svc.stats().requests.generate.ok, 1, 'then the fallback')
  // the failing server is now down: the fallback at once, in a stream too
  const openai = new OpenAI({ baseURL: `${front.base}/v1`, apiKey: 'none', maxRetries: 0 })
  let chunks = 0
  for await (const c of await openai.chat.completions.create({ model: 'big', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, stream: true })) {
    if ((c.choices[0]?.delta.content ?? '') !== '') chunks++
  }
  assert.ok(chunks > 0)
  assert.equal(failing.bodies.length, 1)

  // "lonely" has no fallback and its only server is down: 503 naming why, in each shape
  const o = await post(front.base, '/api/generate', { model: 'lonely', prompt: 'x' })
  assert.equal(o.status, 503)
  assert.match(o.json.error, /^no model server serving lonely:latest is up \(failing: model server failing failed: HTTP 500: fake says 500\)$/)
  await assert.rejects(openai.chat.completions.create({ model: 'lonely', messages: [{ role: 'user', content: 'Hi' }] }),
    (e: unknown) => e instanceof OpenAI.APIError && e.status === 503 && e.code === 'LB_ERR_GEN_NO_SERVER')
})

test('a server answering 500 with no fallback: 502 in the caller\'s shape', async (t) => {
  const failing = await startFakeOpenAi(t, ['m'])
  const front = await startFront(t, [{ name: 'failing', kind: 'openai', url: failing.url, refresh: '10m' }])
  failing.mode = 'fail500'
  const openai = new OpenAI({ baseURL: `${front.base}/v1`, apiKey: 'none', maxRetries: 0 })
  await assert.rejects(openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] }),
    (e: unknown) => e instanceof OpenAI.APIError && e.status === 502 && e.code === 'LB_ERR_GEN_UPSTREAM' && /fake says 500/.test(e.message))
})

for (const api of ['openai', 'ollama'] as const) {
  test(`a client that disconnects (${api} API) closes the request to the server`, async (t) => {
    const fake = await startFakeOpenAi(t, ['m'])
    const front = await startFront(t, [{ name: 'f', kind: 'openai', url: fake.url }])
    fake.mode = 'hang'
    const closed = once(fake.events, 'closed')
    const ac = new AbortController()
    const path = api === 'openai' ? '/v1/chat/completions' : '/api/chat'
    const res = await fetch(`${front.base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
      signal: ac.signal,
    })
    const reader = res.body!.getReader()
    const first = await reader.read()
    assert.match(Buffer.from(first.value!).toString(), /Hello/)
    ac.abort()
    await within(closed, 10_000, 'close of the upstream request')
    assert.equal(fake.bodies.length, 1)
  })
}

test('a server that sends [DONE] and holds its reply open: the client gets its end at once, the upstream reply is closed', async (t) => {
  const fake = await startFakeOpenAi(t, ['m'])
  const front = await startFront(t, [{ name: 'f', kind: 'openai', url: fake.url }])
  fake.mode = 'done-hold'
  const closed = once(fake.events, 'closed')
  const openai = new OpenAI({ baseURL: `${front.base}/v1`, apiKey: 'none', maxRetries: 0 })
  let text = ''
  let usage: unknown = null
  // before, the client waited for the server to end its reply: here, for as long as the server holds it
  await within((async () => {
    const stream = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true } })
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? ''
      if (c.usage) usage = c.usage
    }
  })(), 10_000, 'end of the stream')
  assert.equal(text, 'Hello there friend')
  assert.deepEqual(usage, { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 }, 'the usage chunk before [DONE] is counted and relayed')
  await within(closed, 10_000, 'close of the upstream reply')
  assert.equal(front.svc.stats().requests.chat.ok, 1)
})

test('a fallback this machine has is served here; an alias may name a local model', async (t) => {
  const failing = await startFakeOpenAi(t, ['big'])
  const front = await startGen(t, { builtin_model: false, servers: [{ name: 'failing', kind: 'openai', url: failing.url, refresh: '10m' }], fallbacks: { big: ['stories'] }, aliases: { 'gpt-4o-mini': 'stories' } })
  failing.mode = 'fail500'
  const r = await post(front.base, '/api/generate', { model: 'big', prompt: 'Once', stream: false, options: { num_predict: 3 } })
  assert.equal(r.status, 200, r.text)
  assert.equal(r.json.model, 'big')
  assert.equal(failing.bodies.length, 1)
  assert.equal(front.svc.stats().requests.generate.ok, 1, 'served by the local runner')
  const openai = new OpenAI({ baseURL: `${front.base}/v1`, apiKey: 'none', maxRetries: 0 })
  const a = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 })
  assert.equal(a.model, 'gpt-4o-mini')
  assert.ok(a.usage!.completion_tokens > 0)
  assert.equal(failing.bodies.length, 1, 'a local model never goes to a server')
})

test('a client that stops reading slows the server: lb stops reading its reply instead of buffering it', async (t) => {
  const fake = await startFakeOpenAi(t, ['m'])
  const front = await startFront(t, [{ name: 'f', kind: 'openai', url: fake.url }])
  await assertFloodStalls(fake, (signal) => fetch(`${front.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
    signal,
  }))
})
