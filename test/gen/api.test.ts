// The Ollama wire format of the real service: every response field, stream
// true and false, chat, the read-only endpoints, and the error answers.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Agent, request } from 'undici'
import { get, lines, post, startGen } from './helpers.js'

const METRICS = ['total_duration', 'load_duration', 'prompt_eval_count', 'prompt_eval_duration', 'eval_count', 'eval_duration']

test('generation API (Ollama wire format)', async (t) => {
  const { base, svc } = await startGen(t)

  await t.test('stream false: one JSON document with the whole text and every metric', async () => {
    const r = await post(base, '/api/generate', { model: 'stories', prompt: 'Once upon a time', stream: false, options: { num_predict: 24, seed: 7 } })
    assert.equal(r.status, 200)
    assert.match(r.type, /^application\/json/)
    const o = r.json
    assert.equal(o.model, 'stories')
    assert.match(o.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/)
    assert.equal(typeof o.response, 'string')
    assert.ok(o.response.length > 0)
    assert.equal(o.done, true)
    assert.equal(o.done_reason, 'length')
    for (const k of METRICS) assert.ok(Number.isInteger(o[k]) && o[k] >= 0, `${k} = ${o[k]}`)
    assert.equal(o.eval_count, 24)
    assert.ok(o.prompt_eval_count >= 2)
    assert.ok(o.total_duration >= o.eval_duration + o.prompt_eval_duration, 'total covers the parts (ns)')
    assert.ok(Array.isArray(o.context) && o.context.length === o.prompt_eval_count - 1 + o.eval_count)
  })

  await t.test('stream true (the default): NDJSON, one chunk per piece, the last with the metrics', async () => {
    const r = await post(base, '/api/generate', { model: 'stories', prompt: 'Once upon a time', options: { num_predict: 16, seed: 7 } })
    assert.equal(r.status, 200)
    assert.equal(r.type, 'application/x-ndjson')
    assert.ok(r.text.endsWith('\n'))
    const chunks = lines(r.text)
    const last = chunks.pop()
    assert.ok(chunks.length >= 2)
    for (const c of chunks) {
      assert.deepEqual(Object.keys(c), ['model', 'created_at', 'response', 'done'])
      assert.equal(c.done, false)
    }
    assert.equal(last.done, true)
    assert.equal(last.response, '')
    for (const k of METRICS) assert.ok(Number.isInteger(last[k]), k)
    // Same seed and settings as the previous test: the pieces are the same text.
    const whole = await post(base, '/api/generate', { model: 'stories', prompt: 'Once upon a time', stream: false, options: { num_predict: 16, seed: 7 } })
    assert.equal(chunks.map((c) => c.response).join(''), whole.json.response)
  })

  await t.test('top-level temperature (as the seed clients send it), system and raw', async () => {
    const a = await post(base, '/api/generate', { model: 'stories', prompt: 'Tom', temperature: 0, stream: false, options: { num_predict: 12 } })
    const b = await post(base, '/api/generate', { model: 'stories', prompt: 'Tom', options: { temperature: 0, num_predict: 12 }, stream: false })
    assert.equal(a.status, 200)
    assert.equal(a.json.response, b.json.response, 'temperature 0 is greedy either way')
    const s = await post(base, '/api/generate', { model: 'stories', prompt: 'Tom', system: 'Lily had a dog.', stream: false, options: { temperature: 0, num_predict: 4 } })
    assert.ok(s.json.prompt_eval_count > a.json.prompt_eval_count, 'the system prompt is evaluated')
    const raw = await post(base, '/api/generate', { model: 'stories', prompt: 'Tom', raw: true, stream: false, options: { num_predict: 4 } })
    assert.equal(raw.status, 200)
    assert.equal(raw.json.context, undefined, 'raw replies carry no context')
  })

  await t.test('stop sequences end the reply with done_reason stop', async () => {
    const r = await post(base, '/api/generate', { model: 'stories', prompt: 'Once upon a time', stream: false, options: { temperature: 0, num_predict: 200, stop: ['.'] } })
    assert.equal(r.json.done_reason, 'stop')
    assert.ok(!r.json.response.includes('.'))
  })

  await t.test('num_predict and max_tokens bound the reply even when the last token ends mid-character', async () => {
    // With this seed the random model's 14th token is the first byte of a character the 15th does not finish
    // (its reply shows U+FFFD there); node-llama-cpp checked its limit only after the 15th, and usage said 15.
    const ask = (n: number, stream: boolean) => post(base, '/api/generate', { model: 'random', prompt: 'Hi', stream, options: { num_predict: n, seed: 34 } })
    const longer = (await ask(15, false)).json
    const whole = (await ask(13, false)).json
    assert.equal(longer.eval_count, 15)
    assert.ok(longer.response.startsWith(`${whole.response}\uFFFD`), 'the premise: token 14 ends mid-character')
    const r = (await ask(14, false)).json
    assert.equal(r.eval_count, 14)
    assert.equal(r.done_reason, 'length')
    assert.equal(r.response, whole.response, 'the unfinished character is dropped')
    const chunks = lines((await ask(14, true)).text)
    assert.equal(chunks.at(-1).eval_count, 14)
    assert.equal(chunks.map((c) => c.response).join(''), whole.response)
    const o = await post(base, '/v1/completions', { model: 'random', prompt: 'Hi', max_tokens: 14, seed: 34 })
    assert.equal(o.json.usage.completion_tokens, 14)
    assert.equal(o.json.choices[0].text, whole.response)
    assert.equal(o.json.choices[0].finish_reason, 'length')
  })

  await t.test('chat: messages with roles, message chunks, no context', async () => {
    const r = await post(base, '/api/chat', {
      model: 'stories',
      messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me about a cat.' }],
      options: { num_predict: 10 },
    })
    assert.equal(r.status, 200)
    const chunks = lines(r.text)
    const last = chunks.pop()
    for (const c of chunks) assert.deepEqual(c.message.role, 'assistant')
    assert.equal(last.done, true)
    assert.deepEqual(last.message, { role: 'assistant', content: '' })
    assert.equal(last.context, undefined)
    assert.equal(last.eval_count, 10)
    const nc = await post(base, '/api/chat', { model: 'random', messages: [{ role: 'user', content: 'hi' }], stream: false, options: { num_predict: 5 } })
    assert.equal(nc.json.message.role, 'assistant')
    assert.equal(typeof nc.json.message.content, 'string')
  })

  await t.test('empty prompt loads the model; keep_alive 0 unloads it; /api/ps follows', async () => {
    const l = await post(base, '/api/generate', { model: 'random' })
    assert.equal(l.json.done_reason, 'load')
    assert.deepEqual(Object.keys(l.json), ['model', 'created_at', 'response', 'done', 'done_reason'])
    let ps = await get(base, '/api/ps')
    const m = ps.json.models.find((x: any) => x.name === 'random:latest')
    assert.ok(m, 'loaded model is listed')
    assert.ok(Date.parse(m.expires_at) > Date.now())
    assert.equal(m.details.format, 'gguf')
    const u = await post(base, '/api/generate', { model: 'random', keep_alive: 0 })
    assert.equal(u.json.done_reason, 'unload')
    ps = await get(base, '/api/ps')
    assert.ok(!ps.json.models.some((x: any) => x.name === 'random:latest'))
    const chatLoad = await post(base, '/api/chat', { model: 'random', messages: [] })
    assert.equal(chatLoad.json.done_reason, 'load')
  })

  await t.test('tags, show, version, and the root', async () => {
    const tags = await get(base, '/api/tags')
    const names = tags.json.models.map((m: any) => m.name)
    for (const n of ['stories:latest', 'random:latest', 'hostile:latest', 'lb-tiny:latest']) assert.ok(names.includes(n), n)
    const s = tags.json.models.find((m: any) => m.name === 'stories:latest')
    assert.equal(s.details.family, 'llama')
    assert.match(s.digest, /^[0-9a-f]{64}$/)
    assert.ok(s.size > 1_000_000)
    const show = await post(base, '/api/show', { model: 'stories' })
    assert.equal(show.status, 200)
    assert.equal(show.json.model_info['general.architecture'], 'llama')
    assert.deepEqual(show.json.capabilities, ['completion'])
    assert.equal((await post(base, '/api/show', {})).status, 400)
    assert.equal((await post(base, '/api/show', { model: 'nope' })).json.error, "model 'nope' not found")
    assert.match((await get(base, '/api/version')).json.version, /^\d+\.\d+\.\d+$/)
    assert.equal((await get(base, '/')).text, 'Ollama is running')
    assert.equal((await get(base, '/api/health')).status, 200)
  })

  await t.test('errors as Ollama: 400 for bad input, 404 for unknown models', async () => {
    const cases: Array<[unknown, number, RegExp]> = [
      ['', 400, /^missing request body$/],
      ['{"model": "stories", ', 400, /^invalid JSON/],
      ['[1,2]', 400, /expected a JSON object/],
      [{ model: 'stories', prompt: 'x', stream: 'yes' }, 400, /"stream".*true or false.*"yes"/],
      [{ model: 'stories', prompt: 'x', options: { temperature: 'hot' } }, 400, /options\.temperature/],
      [{ model: 'stories', prompt: 'x', options: { top_k: 1.5 } }, 400, /options\.top_k.*integer/],
      [{ model: 'stories', prompt: 'x', options: { stop: 'x' } }, 400, /options\.stop/],
      [{ model: 'stories', prompt: 'x', format: 'xml' }, 400, /^invalid format: "xml"; expected "json" or a valid JSON Schema object$/],
      [{ model: 'stories', prompt: 'x', raw: true, system: 's' }, 400, /^raw mode does not support template, system, or context$/],
      [{ model: 'stories', prompt: 'x', keep_alive: 'soon' }, 400, /keep_alive/],
      [{ model: 'stories', prompt: 'x', top_logprobs: 21 }, 400, /^top_logprobs must be between 0 and 20$/],
      [{ model: 'stories', prompt: 'x', think: true }, 400, /does not support thinking/],
      [{ model: 'Bad Name!', prompt: 'x' }, 400, /^invalid model name$/],
      [{ model: 'missing', prompt: 'x' }, 404, /^model 'missing' not found$/],
      [{}, 404, /^model '' not found$/],
      ['null', 404, /^model '' not found$/],
    ]
    for (const [body, status, message] of cases) {
      const r = await post(base, '/api/generate', body)
      assert.equal(r.status, status, JSON.stringify(body))
      assert.match(r.type, /^application\/json/)
      assert.match(r.json.error, message, JSON.stringify(body))
    }
    assert.equal((await post(base, '/api/chat', { messages: [] })).json.error, 'model is required')
    const badRole = await post(base, '/api/chat', { model: 'stories', messages: [{ role: 'robot', content: 'x' }] })
    assert.match(badRole.json.error, /messages\[0\]\.role/)
    assert.equal((await get(base, '/api/generate')).status, 405)
    assert.equal((await get(base, '/api/nothing')).status, 404)
    const st = svc.stats()
    assert.ok(st.requests.generate.client_error >= cases.length)
  })

  await t.test('the unix socket serves the same API (the data plane upstream)', async () => {
    const agent = new Agent({ connect: { socketPath: svc.socketPath } })
    t.after(() => agent.close())
    const r = await request('http://gen/api/generate', {
      method: 'POST', dispatcher: agent, body: JSON.stringify({ model: 'lb-tiny', prompt: 'hi', stream: false, options: { num_predict: 8 } }),
    })
    assert.equal(r.statusCode, 200)
    const o = await r.body.json() as { eval_count: number, model: string }
    assert.equal(o.model, 'lb-tiny')
    assert.ok(o.eval_count > 0 && o.eval_count <= 8)
  })
})
