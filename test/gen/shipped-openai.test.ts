// The new user: the shipped config, the official clients of both APIs.
// /v1/ and /api/ reach the generation endpoint (never the catch-all web
// router's backends, which are not even running here), and lb's own answers
// there are in each API's shape.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Ollama } from 'ollama'
import OpenAI from 'openai'
import { shippedConfig, startLb, tempDir } from '../helpers.js'

test('shipped config: an OpenAI client and an Ollama client both reach the generation endpoint', async (t) => {
  const { text } = await shippedConfig()
  const state = tempDir()
  const lb = await startLb(text, { env: { STATE_DIRECTORY: state, RUNTIME_DIRECTORY: state } })
  t.after(() => lb.stop())
  const url = `http://127.0.0.1:${await lb.portOf('web')}`
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0 })

  const ids = []
  for await (const m of client.models.list()) ids.push(m.id)
  assert.deepEqual(ids, ['lb-tiny:latest'])
  // greedy: a sampled reply may meet the end-of-text token within 5 (usage then says fewer, finish_reason "stop")
  const reply = await client.chat.completions.create({ model: 'lb-tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 5, temperature: 0 })
  assert.equal(typeof reply.choices[0]!.message.content, 'string')
  assert.equal(reply.choices[0]!.finish_reason, 'length')
  assert.equal(reply.usage!.completion_tokens, 5)
  let chunks = 0
  for await (const c of await client.chat.completions.create({ model: 'lb-tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 5, stream: true, temperature: 0 })) {
    if (c.choices[0]?.delta.content !== undefined) chunks++
  }
  assert.ok(chunks > 0, 'the stream carries the reply')
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] }),
    (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found')

  const ollama = new Ollama({ host: url })
  assert.deepEqual((await ollama.list()).models.map((m) => m.name), ['lb-tiny:latest'])
  assert.equal((await ollama.embed({ model: 'lb-tiny', input: 'Hello' })).embeddings[0]!.length, 16)
})
