// Keys and budgets for models on remote servers ([[generation.servers]]):
// the same hook charges a remote reply's tokens (the usage the server reports:
// the fake says 7 prompt + 3 completion tokens) and a key's allow-list hides a
// remote model as it hides a local one. The client's key is lb's to check:
// the server only ever sees the key lb has for it.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import OpenAI from 'openai'
import { tokenHash } from '../../core/auth/token-digest.js'
import { startLb } from '../helpers.js'
import { startFakeOpenAi } from './fake-openai.js'
import { gatewayConfig, STORIES, withinOneMinute } from './helpers.js'

const TPM = 'lb-remote-tpm-0123456789abcdefgh'
const LOCAL_ONLY = 'lb-local-only-0123456789abcdefgh'

test('a remote reply\'s usage is charged to the key; a remote model off the allow-list is hidden', async (t) => {
  const fake = await startFakeOpenAi(t, ['remote-model'])
  const lb = await startLb(gatewayConfig({ stories: STORIES }, `
[[generation.servers]]
name = "fake"
kind = "openai"
url = "${fake.url}/v1"
[[generation.keys]]
consumer = "remote-tpm"
hash = "${tokenHash(TPM)}"
tpm = 15
[[generation.keys]]
consumer = "local-only"
hash = "${tokenHash(LOCAL_ONLY)}"
models = ["stories"]
`))
  t.after(() => lb.stop())
  const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: TPM, maxRetries: 0 })
  await withinOneMinute(async () => {
    // 10 tokens each (from the server's usage): the first two are admitted (0, then 10 < 15), the third is not
    for (let i = 0; i < 2; i++) {
      const r = await client.chat.completions.create({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5 })
      assert.equal(r.usage!.total_tokens, 10)
    }
    await assert.rejects(client.chat.completions.create({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5 }),
      (e: unknown) => e instanceof OpenAI.RateLimitError && /tpm = 15 tokens per minute \(20 used\)/.test(e.message))
  })
  assert.equal(fake.bodies.length, 2, 'the refused request never reached the server')
  assert.ok(fake.auth.every((a) => !a.includes(TPM)), 'the client\'s key is not sent on')

  const local = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: LOCAL_ONLY, maxRetries: 0 })
  const ids: string[] = []
  for await (const m of local.models.list()) ids.push(m.id)
  assert.deepEqual(ids, ['stories:latest'])
  const all: string[] = []
  for await (const m of client.models.list()) all.push(m.id)
  assert.deepEqual(all.sort(), ['remote-model', 'stories:latest'])
  await assert.rejects(local.chat.completions.create({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }] }),
    (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found')
  await assert.rejects(local.models.retrieve('remote-model'), OpenAI.NotFoundError)
  await assert.rejects(local.embeddings.create({ model: 'remote-model', input: 'x' }), OpenAI.NotFoundError)
  assert.equal(fake.bodies.length, 2, 'nothing of the local-only key reached the server')
})
