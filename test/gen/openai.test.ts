// The OpenAI API of the generation endpoint, through the real balancer
// (`lb run` with a kind = "generate" service), driven by the official `openai`
// client unchanged: chat (stream and not), completions, models, embeddings,
// response_format, tools with each tool_choice, and lb's own refusals in front
// of the service (basicAuth's 401, rateLimit's 429, max_body's 413) in
// OpenAI's error shape, which the client turns into its error classes.

import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import bcrypt from 'bcryptjs'
import OpenAI from 'openai'
import { llamaGgufBytes } from '../../core/gen/models/llama-gguf.js'
import { type Lb, startLb, tempDir } from '../helpers.js'
import { RANDOM, schemaMismatch, STORIES } from './helpers.js'

/** A model that opens its reply with "{" (so, with tool_choice "auto", it calls a tool), else writes letter soup. */
function writeOpener (dir: string): string {
  const file = join(dir, 'opener.gguf')
  writeFileSync(file, llamaGgufBytes({ name: 'opener', embd: 16, ff: 32, heads: 2, blocks: 1, ctx: 4096, type: 'f32', eosFreq: 8, freq: { '{': 100_000 } }))
  return file
}

const config = (models: string): string => `
[limits]
max_body = "12M"

[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.auth]
address = "127.0.0.1:0"
[entrypoints.limited]
address = "127.0.0.1:0"

[generation]
socket = "{{DIR}}/gen.sock"
ollama_models = "off"
[generation.models]
${models}

[routers.gen]
rule = "PathPrefix(\`/api/\`, \`/v1/\`)"
entrypoints = ["web"]
service = "gen"
[routers.gen-auth]
rule = "PathPrefix(\`/\`)"
entrypoints = ["auth"]
service = "gen"
middlewares = ["users"]
[routers.gen-limited]
rule = "PathPrefix(\`/\`)"
entrypoints = ["limited"]
service = "gen"
middlewares = ["once"]

[middlewares.users]
type = "basicAuth"
users = ["ann:${bcrypt.hashSync('right', 4)}"]
[middlewares.once]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 1
period = "1m"

[services.gen]
kind = "generate"
`

const WEATHER = { type: 'function' as const, function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] } } }
const TIME = { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { enum: ['utc', 'local'] } }, required: ['zone'] } } }
const ASK = [{ role: 'user' as const, content: 'What is the weather in Paris?' }]

/** Each SSE event's data, in order. */
async function events (url: string, body: unknown): Promise<{ status: number, type: string, data: string[] }> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const text = await r.text()
  const data = text.split('\n\n').filter((e) => e !== '').map((e) => { assert.ok(e.startsWith('data: '), e); return e.slice(6) })
  return { status: r.status, type: r.headers.get('content-type') ?? '', data }
}

async function post (url: string, body: string): Promise<{ status: number, type: string, json: any }> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  const text = await r.text()
  return { status: r.status, type: r.headers.get('content-type') ?? '', json: JSON.parse(text) }
}

/** OpenAI's error body, with the status and the param expected. */
function assertOpenAiError (r: { status: number, type: string, json: any }, status: number, param: string | null, message: RegExp): void {
  assert.equal(r.status, status, JSON.stringify(r.json))
  assert.match(r.type, /^application\/json/)
  assert.deepEqual(Object.keys(r.json.error).sort(), ['code', 'message', 'param', 'type'])
  assert.equal(r.json.error.param, param)
  assert.match(r.json.error.message, message)
}

describe('the OpenAI API through the balancer, with the official client', () => {
  let lb: Lb
  let client: OpenAI
  let base: string
  before(async () => {
    const dir = tempDir()
    lb = await startLb(config(`stories = "${STORIES}"\nrandom = "${RANDOM}"\nopener = "${writeOpener(dir)}"`))
    base = lb.url
    client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'not-checked', maxRetries: 0 })
  })
  after(async () => { await lb?.stop() })

  test('chat, not streamed: the reply, finish_reason, usage; a seed repeats it', async () => {
    const ask = { model: 'stories', messages: [{ role: 'user' as const, content: 'Once upon a time' }], max_tokens: 12, seed: 7, temperature: 0.9 }
    const a = await client.chat.completions.create(ask)
    assert.equal(a.object, 'chat.completion')
    assert.equal(a.model, 'stories')
    assert.equal(a.choices.length, 1)
    const c = a.choices[0]!
    assert.equal(c.message.role, 'assistant')
    assert.ok(typeof c.message.content === 'string' && c.message.content.length > 0)
    assert.ok(c.finish_reason === 'length' || c.finish_reason === 'stop')
    assert.ok(a.usage!.prompt_tokens > 0)
    assert.ok(a.usage!.completion_tokens > 0 && a.usage!.completion_tokens <= 12)
    assert.equal(a.usage!.total_tokens, a.usage!.prompt_tokens + a.usage!.completion_tokens)
    const b = await client.chat.completions.create(ask)
    assert.equal(b.choices[0]!.message.content, c.message.content, 'same seed, same reply')
    // stop sequences (a string or an array) end the reply before them
    const stopped = await client.chat.completions.create({ ...ask, max_tokens: 40, stop: '.' })
    assert.equal(stopped.choices[0]!.finish_reason, 'stop')
    assert.ok(!stopped.choices[0]!.message.content!.includes('.'), stopped.choices[0]!.message.content!)
  })

  test('chat, streamed: content chunks, a finish chunk, the usage chunk when asked, [DONE]', async () => {
    const ask = { model: 'stories', messages: [{ role: 'user' as const, content: 'Once upon a time' }], max_tokens: 10, seed: 3 }
    const stream = await client.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } })
    const chunks: OpenAI.ChatCompletionChunk[] = []
    for await (const c of stream) chunks.push(c)
    const usage = chunks.at(-1)!
    assert.deepEqual(usage.choices, [], 'the last chunk carries the usage and no choice')
    assert.equal(usage.usage!.completion_tokens, 10)
    const finish = chunks.at(-2)!
    assert.equal(finish.choices[0]!.finish_reason, 'length')
    const content = chunks.slice(0, -2)
    assert.ok(content.length > 1)
    for (const c of content) {
      assert.equal(c.object, 'chat.completion.chunk')
      assert.equal(c.choices[0]!.finish_reason, null)
      assert.equal(c.usage, null, 'with include_usage, the other chunks have "usage": null')
    }
    const text = content.map((c) => c.choices[0]!.delta.content).join('')
    const whole = await client.chat.completions.create(ask)
    assert.equal(text, whole.choices[0]!.message.content, 'the stream carries the same reply')
    // on the wire: no usage chunk without include_usage, [DONE] last
    const raw = await events(`${base}/v1/chat/completions`, { ...ask, stream: true })
    assert.equal(raw.status, 200)
    assert.match(raw.type, /^text\/event-stream/)
    assert.equal(raw.data.at(-1), '[DONE]')
    const objs = raw.data.slice(0, -1).map((d) => JSON.parse(d))
    assert.equal(objs.at(-1).choices[0].finish_reason, 'length')
    assert.ok(objs.every((o) => o.choices.length === 1 && !('usage' in o)))
  })

  test('completions, streamed and not', async () => {
    const ask = { model: 'stories', prompt: 'Once upon a time', max_tokens: 8, seed: 5 }
    const a = await client.completions.create(ask)
    assert.equal(a.object, 'text_completion')
    assert.ok(a.choices[0]!.text.length > 0)
    assert.equal(a.choices[0]!.finish_reason, 'length')
    assert.equal(a.usage!.completion_tokens, 8)
    const chunks: OpenAI.Completion[] = []
    for await (const c of await client.completions.create({ ...ask, stream: true })) chunks.push(c)
    assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), a.choices[0]!.text)
    assert.equal(chunks.at(-1)!.choices[0]!.finish_reason, 'length')
  })

  test('models: the list and one model; a model nobody serves is a NotFoundError (model_not_found)', async () => {
    const ids = []
    for await (const m of client.models.list()) ids.push(m.id)
    assert.deepEqual(ids.sort(), ['lb-tiny:latest', 'opener:latest', 'random:latest', 'stories:latest'])
    const m = await client.models.retrieve('stories')
    assert.equal(m.id, 'stories:latest')
    assert.equal(m.object, 'model')
    assert.equal(m.owned_by, 'library')
    await assert.rejects(client.models.retrieve('gpt-4o'), (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found')
    await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: ASK }),
      (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found' && e.param === 'model')
  })

  test('embeddings: one unit vector per input (base64 as the client asks by default, or floats)', async () => {
    const r = await client.embeddings.create({ model: 'stories', input: ['hello world', 'hello world', 'a cat'] })
    assert.equal(r.object, 'list')
    assert.equal(r.data.length, 3)
    const [a, b, c] = r.data.map((d) => d.embedding)
    assert.equal(a!.length, 64, 'stories260K has 64 dimensions')
    assert.ok(Math.abs(Math.hypot(...a!) - 1) < 1e-4, 'normalised')
    assert.deepEqual(a, b)
    assert.notDeepEqual(a, c)
    assert.ok(r.usage.prompt_tokens > 0)
    const floats = await client.embeddings.create({ model: 'stories', input: 'hello world', encoding_format: 'float' })
    assert.ok(floats.data[0]!.embedding.every((x, i) => Math.abs(x - a![i]!) < 1e-6), 'float and base64 carry the same vector')
    const cut = await client.embeddings.create({ model: 'stories', input: 'hello world', dimensions: 8, encoding_format: 'float' })
    assert.equal(cut.data[0]!.embedding.length, 8)
    await assert.rejects(client.embeddings.create({ model: 'stories', input: 'x', dimensions: 65 }), (e: unknown) => e instanceof OpenAI.BadRequestError && /64 dimensions/.test(e.message))
  })

  test('response_format json_object and json_schema: the reply parses and matches', async () => {
    const obj = await client.chat.completions.create({ model: 'stories', messages: ASK, max_tokens: 30, seed: 1, response_format: { type: 'json_object' } })
    const v = JSON.parse(obj.choices[0]!.message.content!)
    assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v))
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' }, tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 } }, required: ['name', 'age', 'tags'], additionalProperties: false }
    for (const seed of [1, 2, 3]) {
      for (const max of [4, 40]) {
        const r = await client.chat.completions.create({ model: 'random', messages: ASK, max_tokens: max, seed, response_format: { type: 'json_schema', json_schema: { name: 'person', schema } } })
        const doc = JSON.parse(r.choices[0]!.message.content!)
        assert.equal(schemaMismatch(schema, doc), null, r.choices[0]!.message.content!)
      }
    }
    await assert.rejects(client.chat.completions.create({ model: 'stories', messages: ASK, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a' } } } }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && /keyword "pattern" is not supported/.test(e.message) && e.param === 'response_format.json_schema.schema')
  })

  test('tools: tool_choice required, a named function, none, auto', async () => {
    const args = (c: OpenAI.ChatCompletion): { name: string, value: unknown } => {
      const call = c.choices[0]!.message.tool_calls![0]!
      assert.equal(call.type, 'function')
      assert.match(call.id, /^call_/)
      return { name: (call as OpenAI.ChatCompletionMessageFunctionToolCall).function.name, value: JSON.parse((call as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments) }
    }
    for (const model of ['stories', 'random', 'lb-tiny']) {
      const req = await client.chat.completions.create({ model, messages: ASK, max_tokens: 60, seed: 2, tools: [WEATHER, TIME], tool_choice: 'required' })
      assert.equal(req.choices[0]!.message.content, null)
      assert.ok(['tool_calls', 'length'].includes(req.choices[0]!.finish_reason), req.choices[0]!.finish_reason)
      const a = args(req)
      assert.ok(a.name === 'get_weather' || a.name === 'get_time')
      assert.equal(schemaMismatch((a.name === 'get_weather' ? WEATHER : TIME).function.parameters, a.value), null)

      const named = await client.chat.completions.create({ model, messages: ASK, max_tokens: 60, seed: 2, tools: [WEATHER, TIME], tool_choice: { type: 'function', function: { name: 'get_time' } } })
      const n = args(named)
      assert.equal(n.name, 'get_time')
      assert.ok(n.value !== null && ['utc', 'local'].includes((n.value as { zone: string }).zone))
    }
    const none = await client.chat.completions.create({ model: 'lb-tiny', messages: ASK, max_tokens: 10, seed: 2, tools: [WEATHER], tool_choice: 'none' })
    assert.equal(typeof none.choices[0]!.message.content, 'string')
    assert.equal(none.choices[0]!.message.tool_calls, undefined)
    const plain = await client.chat.completions.create({ model: 'lb-tiny', messages: ASK, max_tokens: 10, seed: 2 })
    assert.equal(none.usage!.prompt_tokens, plain.usage!.prompt_tokens, '"none": the tools are not shown to the model')

    // auto: a model that writes text answers in text; one that opens with "{" makes a call, held to the tools' grammar
    const text = await client.chat.completions.create({ model: 'lb-tiny', messages: ASK, max_tokens: 10, seed: 2, tools: [WEATHER] })
    assert.equal(typeof text.choices[0]!.message.content, 'string')
    assert.ok(text.usage!.prompt_tokens > plain.usage!.prompt_tokens, '"auto": the tools are described to the model')
    const call = await client.chat.completions.create({ model: 'opener', messages: ASK, max_tokens: 60, seed: 2, tools: [WEATHER], tool_choice: 'auto' })
    const c = args(call)
    assert.equal(c.name, 'get_weather')
    assert.equal(schemaMismatch(WEATHER.function.parameters, c.value), null)
    // streamed: the call arrives whole in one chunk, then finish_reason "tool_calls" (or "length")
    const chunks: OpenAI.ChatCompletionChunk[] = []
    for await (const k of await client.chat.completions.create({ model: 'opener', messages: ASK, max_tokens: 60, seed: 2, tools: [WEATHER], stream: true })) chunks.push(k)
    assert.equal(chunks.length, 2)
    assert.equal(chunks[0]!.choices[0]!.delta.tool_calls![0]!.function!.name, 'get_weather')
    assert.deepEqual(JSON.parse(chunks[0]!.choices[0]!.delta.tool_calls![0]!.function!.arguments!), c.value)
    assert.equal(chunks[1]!.choices[0]!.finish_reason, call.choices[0]!.finish_reason)

    // the conversation goes on: the assistant's call and the tool's result are accepted
    const next = await client.chat.completions.create({
      model: 'stories', max_tokens: 5,
      messages: [...ASK, call.choices[0]!.message, { role: 'tool', tool_call_id: call.choices[0]!.message.tool_calls![0]!.id, content: 'sunny' }],
    })
    assert.equal(typeof next.choices[0]!.message.content, 'string')
    await assert.rejects(client.chat.completions.create({ model: 'stories', messages: ASK, tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice')
  })

  test('hostile bodies: 400 (413 for prompt text over max_prompt_bytes) in OpenAI\'s shape, naming the field', async () => {
    const url = `${base}/v1/chat/completions`
    const msg = JSON.stringify(ASK)
    assertOpenAiError(await post(url, `{"messages":${msg}}`), 400, 'model', /model/)
    assertOpenAiError(await post(url, '{"model":"stories","messages":"hello"}'), 400, 'messages', /expected an array of messages, found "hello"/)
    assertOpenAiError(await post(url, '{"model":"stories","messages":[{"role":"wizard","content":"hi"}]}'), 400, 'messages[0].role', /"wizard"/)
    assertOpenAiError(await post(url, `{"model":"stories","messages":${msg},"temperature":"hot"}`), 400, 'temperature', /"hot"/)
    assertOpenAiError(await post(url, `{"model":"stories","messages":${msg},"n":1000000000}`), 400, 'n', /one choice is generated per request/)
    assertOpenAiError(await post(url, `{"model":"stories","messages":${msg},"n":"many"}`), 400, 'n', /expected an integer/)
    assertOpenAiError(await post(url, `{"model":"stories","messages":${msg},"max_tokens":-1}`), 400, 'max_tokens', /expected an integer from 1/)
    assertOpenAiError(await post(url, '{"model":"stories","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'), 400, 'messages[0].content[0].type', /image_url/)
    assertOpenAiError(await post(url, '{"model":'), 400, null, /invalid JSON/)
    assertOpenAiError(await post(url, '[1,2]'), 400, null, /expected a JSON object/)
    // 10 MB of messages: refused before any model work, the runner is not involved
    const big = JSON.stringify(Array.from({ length: 10_000 }, () => ({ role: 'user', content: 'x'.repeat(1000) })))
    const r = await post(url, `{"model":"stories","messages":${big}}`)
    assertOpenAiError(r, 413, null, /larger than the limit generation\.max_prompt_bytes/)
    assert.equal(r.json.error.code, 'LB_ERR_GEN_PROMPT_TOO_LARGE')
    // the official client's classes follow the status
    await assert.rejects(client.chat.completions.create({ model: 'stories', messages: ASK, n: 3 }), (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === 'n')
  })

  test('lb\'s own refusals in front of the service: 401 (basicAuth), 429 (rateLimit), 413 (max_body) in OpenAI\'s shape', async () => {
    const auth = new OpenAI({ baseURL: `http://127.0.0.1:${await lb.portOf('auth')}/v1`, apiKey: 'not-a-password', maxRetries: 0 })
    const denied = await auth.models.list().then(() => null, (e: unknown) => e)
    assert.ok(denied instanceof OpenAI.AuthenticationError, String(denied))
    assert.equal(denied.status, 401)
    assert.deepEqual(denied.error, { message: 'Unauthorized', type: 'authentication_error', param: null, code: null })
    assert.match(String(denied.headers.get('www-authenticate')), /^Basic realm=/)
    const ok = new OpenAI({ baseURL: `http://127.0.0.1:${await lb.portOf('auth')}/v1`, apiKey: 'x', maxRetries: 0, defaultHeaders: { authorization: `Basic ${Buffer.from('ann:right').toString('base64')}` } })
    assert.ok((await ok.models.retrieve('stories')).id === 'stories:latest', 'the right password passes')

    const limited = new OpenAI({ baseURL: `http://127.0.0.1:${await lb.portOf('limited')}/v1`, apiKey: 'x', maxRetries: 0 })
    await limited.models.list()
    const over = await limited.models.list().then(() => null, (e: unknown) => e)
    assert.ok(over instanceof OpenAI.RateLimitError, String(over))
    assert.deepEqual(over.error, { message: 'Too Many Requests', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' })
    assert.ok(Number(over.headers.get('retry-after')) > 0)

    // max_body (12M) refuses before the service reads a byte
    const huge = await post(`${base}/v1/chat/completions`, JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'x'.repeat(13 << 20) }] }))
    assertOpenAiError(huge, 413, null, /request body larger than 12582912 bytes/)
    // Ollama's clients get Ollama's shape on /api/
    const r = await fetch(`http://127.0.0.1:${await lb.portOf('auth')}/api/tags`)
    assert.equal(r.status, 401)
    assert.deepEqual(await r.json(), { error: 'Unauthorized' })
  })

  test('Ollama\'s /api/embed and /api/embeddings on the same code path', async () => {
    const { Ollama } = await import('ollama')
    const ollama = new Ollama({ host: base })
    const r = await ollama.embed({ model: 'random', input: ['hello', 'hello', 'cat'] })
    assert.equal(r.model, 'random')
    assert.equal(r.embeddings.length, 3)
    assert.equal(r.embeddings[0]!.length, 8, 'llama-2-tiny-random has 8 dimensions')
    assert.deepEqual(r.embeddings[0], r.embeddings[1])
    assert.ok(Math.abs(Math.hypot(...r.embeddings[0]!) - 1) < 1e-4)
    const legacy = await ollama.embeddings({ model: 'random', prompt: 'hello' })
    const scale = Math.hypot(...legacy.embedding)
    assert.ok(legacy.embedding.every((x, i) => Math.abs(x / scale - r.embeddings[0]![i]!) < 1e-4), 'the legacy endpoint: the same vector, not normalised')
    await assert.rejects(ollama.embed({ model: 'nope', input: 'x' }), /model 'nope' not found/)
  })
})
