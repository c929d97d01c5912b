// Remote model servers ([[generation.servers]]): a generation service with no
// local models in front of other lb generation services (Ollama's API, the
// shared test models under other names) and of a small OpenAI-shaped server
// the test writes itself, driven by the official `openai` and `ollama`
// clients: routing to the server that has the model, the union of models,
// each client API against each server kind (stream and not), aliases, 404s
// in both shapes, loaded-model preference.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Ollama } from 'ollama'
import OpenAI from 'openai'
import { startLb } from '../helpers.js'
import { startFakeOpenAi } from './fake-openai.js'
import { type Gen, get, lines, post, RANDOM, startGen, STORIES, until } from './helpers.js'

/** A front service with no model of its own, in front of `servers`. */
async function startFront (t: Parameters<typeof startGen>[0], servers: unknown[], extra: Record<string, unknown> = {}): Promise<Gen> {
  return await startGen(t, { models: {}, builtin_model: false, servers, ...extra })
}

const generated = (g: Gen): number => g.svc.stats().requests.generate.ok + g.svc.stats().requests.chat.ok

test('requests go to the server that has the model; both listings are the union; aliases; unknown models are 404 in each shape', async (t) => {
  const a = await startGen(t, { models: { alpha: STORIES }, builtin_model: false })
  const b = await startGen(t, { models: { beta: RANDOM }, builtin_model: false })
  const front = await startFront(t, [
    { name: 'a', kind: 'lb', url: a.base },
    { name: 'b', kind: 'ollama', url: b.base },
  ], { aliases: { 'gpt-4o-mini': 'alpha' } })
  const ollama = new Ollama({ host: front.base })
  const openai = new OpenAI({ baseURL: `${front.base}/v1`, apiKey: 'none', maxRetries: 0 })

  // both servers read (on a loaded machine a first refresh may time out; the front asks again)
  let names: string[] = []
  await until(async () => (names = (await ollama.list()).models.map((m) => m.name).sort()).length === 3, 20_000, 'both servers listed')
  assert.deepEqual(names, ['alpha:latest', 'beta:latest', 'gpt-4o-mini:latest'])
  const ids: string[] = []
  for await (const m of openai.models.list()) ids.push(m.id)
  assert.deepEqual(ids.sort(), ['alpha:latest', 'beta:latest', 'gpt-4o-mini:latest'])
  assert.equal((await openai.models.retrieve('beta')).id, 'beta')

  const g = await ollama.generate({ model: 'alpha', prompt: 'Once upon a time', options: { num_predict: 6, seed: 1 } })
  assert.ok(g.eval_count > 0 && g.eval_count <= 6)
  assert.equal(generated(a), 1)
  assert.equal(generated(b), 0)
  const c = await ollama.chat({ model: 'beta', messages: [{ role: 'user', content: 'Hi' }], options: { num_predict: 4 } })
  assert.equal(c.message.role, 'assistant')
  assert.equal(generated(b), 1)
  assert.equal(generated(a), 1)

  // an OpenAI client in front of servers that speak Ollama's API: stream and not, usage from the server's counts
  const reply = await openai.chat.completions.create({ model: 'beta', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5, seed: 3 })
  assert.equal(typeof reply.choices[0]!.message.content, 'string')
  assert.ok(reply.usage!.completion_tokens > 0 && reply.usage!.completion_tokens <= 5)
  assert.ok(reply.usage!.prompt_tokens > 0)
  let text = ''
  let usage: OpenAI.CompletionUsage | null | undefined = null
  for await (const ch of await openai.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, stream: true, stream_options: { include_usage: true } })) {
    text += ch.choices[0]?.delta.content ?? ''
    if (ch.usage !== null && ch.usage !== undefined) usage = ch.usage
  }
  assert.ok(text.length > 0)
  assert.ok(usage !== null && usage!.completion_tokens > 0)
  const cmpl = await openai.completions.create({ model: 'alpha', prompt: 'Once', max_tokens: 4 })
  assert.ok(cmpl.usage!.completion_tokens > 0)

  // the alias: served by alpha's server, echoed under the name asked
  const before = generated(a)
  const aliased = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 })
  assert.equal(aliased.model, 'gpt-4o-mini')
  assert.equal(generated(a), before + 1)

  await assert.rejects(openai.chat.completions.create({ model: 'nowhere', messages: [{ role: 'user', content: 'Hi' }] }),
    (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found')
  const r = await post(front.base, '/api/generate', { model: 'nowhere', prompt: 'x' })
  assert.equal(r.status, 404)
  assert.deepEqual(r.json, { error: "model 'nowhere' not found" })
  assert.equal((await post(front.base, '/api/show', { model: 'beta' })).status, 200)
})

test('an Ollama client against an OpenAI-kind server, stream and not: text, token counts, options forwarded', async (t) => {
  const fake = await startFakeOpenAi(t, ['Org/Fake-Model-7B'])
  const front = await startFront(t, [{ name: 'fake', kind: 'openai', url: `${fake.url}/v1`, api_key: 'sk-test' }])
  const ollama = new Ollama({ host: front.base })
  assert.deepEqual((await ollama.list()).models.map((m) => m.name), ['Org/Fake-Model-7B'])

  const r = await ollama.chat({ model: 'org/fake-model-7b', messages: [{ role: 'user', content: 'Hi' }], format: 'json', options: { num_predict: 9, temperature: 0.5, seed: 4, stop: ['x'] } })
  assert.equal(r.message.content, 'Hello there friend')
  assert.equal(r.eval_count, 3)
  assert.equal(r.prompt_eval_count, 7)
  assert.equal(r.done_reason, 'stop')
  const sent = fake.bodies.at(-1)
  assert.equal(sent.model, 'Org/Fake-Model-7B', 'the server gets its own spelling of the name')
  assert.deepEqual(sent.stream_options, { include_usage: true })
  assert.equal(sent.stream, true)
  assert.equal(sent.max_tokens, 9)
  assert.equal(sent.temperature, 0.5)
  assert.equal(sent.seed, 4)
  assert.deepEqual(sent.stop, ['x'])
  assert.deepEqual(sent.response_format, { type: 'json_object' })
  assert.deepEqual(sent.messages, [{ role: 'user', content: 'Hi' }])

  const parts: string[] = []
  let last: any = null
  for await (const p of await ollama.generate({ model: 'org/fake-model-7b', prompt: 'Hi', system: 'Be brief', stream: true })) {
    parts.push(p.response ?? '')
    last = p
  }
  assert.deepEqual(parts.filter((p) => p !== ''), ['Hello', ' there', ' friend'])
  assert.equal(last.done, true)
  assert.equal(last.eval_count, 3)
  assert.deepEqual(fake.bodies.at(-1).messages, [{ role: 'system', content: 'Be brief' }, { role: 'user', content: 'Hi' }])
  // a raw prompt is OpenAI's completions
  const raw = await post(front.base, '/api/generate', { model: 'org/fake-model-7b', prompt: 'Once', raw: true, stream: false })
  assert.equal(raw.json.response, 'Hello there friend')
  assert.equal(fake.bodies.at(-1).prompt, 'Once')

  // a server that ignores include_usage: the completion tokens are the content chunks it sent
  fake.mode = 'no-usage'
  const counted = await ollama.generate({ model: 'org/fake-model-7b', prompt: 'Hi', stream: false })
  assert.equal(counted.response, 'Hello there friend')
  assert.equal(counted.eval_count, 3)
  assert.equal(counted.prompt_eval_count, 0)

  // the server's own 4xx about the request comes back to the client, in its shape
  fake.mode = 'fail400'
  const openai = new OpenAI({ baseURL: `${front.base}/v1`, apiKey: 'none', maxRetries: 0 })
  await assert.rejects(openai.chat.completions.create({ model: 'org/fake-model-7b', messages: [{ role: 'user', content: 'Hi' }] }),
    (e: unknown) => e instanceof OpenAI.BadRequestError && e.message.includes('fake says 400') && e.param === 'temperature')
})

test('the server where the model is loaded is preferred (/api/ps)', async (t) => {
  const one = await startGen(t)
  const two = await startGen(t)
  const front = await startFront(t, [
    { name: 'one', kind: 'lb', url: one.base, refresh: '100ms' },
    { name: 'two', kind: 'lb', url: two.base, refresh: '100ms' },
  ])
  // load "stories" on the second server only
  assert.equal((await post(two.base, '/api/generate', { model: 'stories' })).json.done_reason, 'load')
  await until(async () => (await get(front.base, '/api/ps')).json.models.some((m: any) => m.name === 'stories:latest'), 10_000, 'the front sees the loaded model')
  for (let i = 0; i < 4; i++) {
    const r = await post(front.base, '/api/generate', { model: 'stories', prompt: 'Once', stream: false, options: { num_predict: 2 } })
    assert.equal(r.status, 200, r.text)
  }
  assert.equal(generated(one), 0, 'the server without the model loaded got nothing')
  assert.equal(two.svc.stats().requests.generate.ok, 5)
  assert.equal(lines((await post(front.base, '/api/generate', { model: 'random', prompt: 'x', options: { num_predict: 1 } })).text).at(-1).done, true)
})

test('embeddings from remote servers in both APIs: an lb server\'s to an OpenAI client, an OpenAI-kind server\'s to an Ollama client', async (t) => {
  const a = await startGen(t, { models: { alpha: STORIES }, builtin_model: false })
  const fake = await startFakeOpenAi(t, ['embedder'])
  const front = await startFront(t, [{ name: 'a', kind: 'lb', url: a.base }, { name: 'fake', kind: 'openai', url: fake.url }])
  const openai = new OpenAI({ baseURL: `${front.base}/v1`, apiKey: 'none', maxRetries: 0 })
  const e = await openai.embeddings.create({ model: 'alpha', input: ['one', 'two'] })
  assert.equal(e.data.length, 2)
  assert.equal(e.data[0]!.embedding.length, 64)
  assert.ok(Math.abs(Math.hypot(...e.data[0]!.embedding) - 1) < 1e-3, 'normalised')
  assert.ok(e.usage.prompt_tokens > 0)
  assert.equal(a.svc.stats().requests.embed.ok, 1)

  const ollama = new Ollama({ host: front.base })
  const o = await ollama.embed({ model: 'embedder', input: ['x', 'y', 'z'] })
  assert.deepEqual(o.embeddings, [[0.6, 0.8], [0.6, 0.8], [0.6, 0.8]])
  assert.equal(o.prompt_eval_count, 5)
  assert.deepEqual(fake.bodies.at(-1).input, ['x', 'y', 'z'])
  const cut = await ollama.embed({ model: 'alpha', input: 'one', dimensions: 8 })
  assert.equal(cut.embeddings[0]!.length, 8)
  const r = await post(front.base, '/api/embed', { model: 'nowhere', input: 'x' })
  assert.equal(r.status, 404)
})

test('through the balancer (lb run, two workers): both clients reach a remote server; its key is sent and never logged', async (t) => {
  const fake = await startFakeOpenAi(t, ['remote-model'])
  const lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[generation]
socket = "{{DIR}}/gen.sock"
ollama_models = "off"
builtin_model = false
[[generation.servers]]
name = "fake"
kind = "openai"
url = "${fake.url}/v1"
api_key = "\${LB_TEST_REMOTE_KEY}"
[generation.aliases]
"gpt-4o-mini" = "remote-model"
[routers.gen]
rule = "PathPrefix(\`/api/\`, \`/v1/\`)"
entrypoints = ["web"]
service = "gen"
[services.gen]
kind = "generate"
`, { env: { LB_TEST_REMOTE_KEY: 'sk-secret-remote-key' } })
  t.after(() => lb.stop())
  const openai = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: 'none', maxRetries: 0 })
  let text = ''
  for await (const c of await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], stream: true })) {
    text += c.choices[0]?.delta.content ?? ''
  }
  assert.equal(text, 'Hello there friend')
  const ollama = new Ollama({ host: lb.url })
  assert.equal((await ollama.chat({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }], stream: false })).message.content, 'Hello there friend')
  assert.ok(fake.auth.length >= 3 && fake.auth.every((a) => a === 'Bearer sk-secret-remote-key'), JSON.stringify(fake.auth))
  await lb.stop()
  assert.ok(!lb.log().includes('sk-secret-remote-key'), 'the key is not in the log')
})
