// Structured output: with `format`, the reply always parses and matches the
// schema, also when the token budget (num_predict or the context) runs out
// (done_reason "length"). Each model x seed runs with the default budget (the
// whole context), where an unconstrained tiny model would ramble for
// thousands of tokens, then hundreds of prompt x seed x format x num_predict
// combinations with budgets of 1 to 40 tokens.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { lines, post, schemaMismatch, startGen } from './helpers.js'
import { PERSON, SCHEMAS } from './schemas.js'

const PROMPTS = ['Describe a cat as JSON.', 'A person:', '{', 'Once upon a time', 'Classify: I love it. Answer positive or negative.', 'x']
const MODELS = ['stories', 'random', 'lb-tiny']

/** The reply's text and final object, streamed or not. */
function reply (text: string, stream: boolean): { response: string, last: any } {
  if (!stream) {
    const last = JSON.parse(text)
    return { response: last.response ?? last.message?.content, last }
  }
  const ls = lines(text)
  const last = ls.pop()
  return { response: ls.map((l) => l.response ?? l.message.content).join(''), last }
}

test('structured output', async (t) => {
  const { base } = await startGen(t, { num_ctx: 512 })

  await t.test('format "json": every reply parses (3 models x 4 seeds)', async () => {
    for (const model of ['stories', 'random', 'lb-tiny']) {
      for (let seed = 1; seed <= 4; seed++) {
        const r = await post(base, '/api/generate', { model, prompt: 'Describe a cat as JSON.', format: 'json', stream: false, options: { seed } })
        assert.equal(r.status, 200)
        assert.equal(r.json.done_reason, 'stop', `${model}/${seed}: ${r.json.response.slice(-80)}`)
        const v = JSON.parse(r.json.response)
        assert.equal(typeof v, 'object', `${model}/${seed}`)
      }
    }
  })

  await t.test('a JSON schema: every reply parses and matches it, integers included', async () => {
    for (const model of ['stories', 'random', 'lb-tiny']) {
      for (let seed = 1; seed <= 4; seed++) {
        const r = await post(base, '/api/generate', { model, prompt: 'A person:', format: PERSON, stream: false, options: { seed, temperature: 1 } })
        assert.equal(r.status, 200)
        const v = JSON.parse(r.json.response)
        assert.equal(schemaMismatch(PERSON, v), null, `${model}/${seed}: ${r.json.response}`)
      }
    }
  })

  await t.test('streamed pieces of a formatted reply join into valid JSON; chat takes format too', async () => {
    const r = await post(base, '/api/generate', { model: 'stories', prompt: 'JSON:', format: PERSON, options: { seed: 5 } })
    const chunks = lines(r.text)
    const last = chunks.pop()
    assert.equal(last.done, true)
    assert.equal(schemaMismatch(PERSON, JSON.parse(chunks.map((c) => c.response).join(''))), null)
    const c = await post(base, '/api/chat', { model: 'stories', messages: [{ role: 'user', content: 'JSON please' }], format: 'json', stream: false, options: { seed: 2 } })
    assert.equal(typeof JSON.parse(c.json.message.content), 'object')
  })

  await t.test('cut by num_predict: done_reason is length, and the reply still parses', async () => {
    const r = await post(base, '/api/generate', { model: 'stories', prompt: 'x', format: 'json', stream: false, options: { num_predict: 3, seed: 1 } })
    assert.equal(r.json.done_reason, 'length')
    assert.ok(r.json.eval_count <= 3)
    assert.equal(typeof JSON.parse(r.json.response), 'object')
    // The case: lb-tiny writes one string for ~2,000 tokens; now it ends it in time.
    const tiny = await post(base, '/api/generate', { model: 'lb-tiny', prompt: 'Classify: I love it. Answer positive or negative.', format: 'json', stream: false, options: { seed: 6, temperature: 0.3, num_ctx: 4096 } })
    assert.equal(typeof JSON.parse(tiny.json.response), 'object', tiny.json.response.slice(-80))
  })

  await t.test('hundreds of prompt x seed x format x num_predict (1..40): every reply is valid', async () => {
    const formats: Array<'json' | Record<string, unknown>> = ['json', ...Object.values(SCHEMAS)]
    let lengths = 0
    let cases = 0
    const one = async (i: number): Promise<void> => {
      const model = MODELS[i % MODELS.length]!
      const format = formats[Math.floor(i / MODELS.length) % formats.length]!
      const numPredict = 1 + (i * 7) % 40
      const stream = i % 2 === 0
      const chat = i % 5 === 0
      const body = {
        model, format, stream, options: { seed: i, num_predict: numPredict, temperature: 0.3 + (i % 4) * 0.4 },
        ...(chat ? { messages: [{ role: 'user', content: PROMPTS[i % PROMPTS.length] }] } : { prompt: PROMPTS[i % PROMPTS.length] }),
      }
      const r = await post(base, chat ? '/api/chat' : '/api/generate', body)
      assert.equal(r.status, 200, r.text)
      const { response, last } = reply(r.text, stream)
      const what = `case ${i}: ${model} ${chat ? 'chat' : 'generate'} num_predict ${numPredict} seed ${i}: ${JSON.stringify(response)}`
      let v: unknown
      assert.doesNotThrow(() => { v = JSON.parse(response) }, what)
      if (format === 'json') assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v), what)
      else assert.equal(schemaMismatch(format, v), null, what)
      assert.ok(last.eval_count <= numPredict, `${what}: ${last.eval_count} tokens`)
      assert.ok(last.done_reason === 'length' || last.done_reason === 'stop', what)
      if (last.done_reason === 'length') lengths++
      cases++
    }
    const N = 320
    for (let i = 0; i < N; i += 8) await Promise.all(Array.from({ length: Math.min(8, N - i) }, (_, k) => one(i + k)))
    assert.equal(cases, N)
    assert.ok(lengths > 50, `${lengths} replies reached their budget`)
  })

  await t.test('budget set by the context, not num_predict: the reply still closes', async () => {
    for (let seed = 1; seed <= 12; seed++) {
      const format = Object.values(SCHEMAS)[seed % 3]!
      const r = await post(base, '/api/generate', { model: MODELS[seed % 3], prompt: 'A person:', format, stream: false, options: { seed, num_ctx: 64, temperature: 1.5 } })
      assert.equal(r.status, 200, r.text)
      assert.equal(schemaMismatch(format, JSON.parse(r.json.response)), null, r.json.response)
    }
  })

  await t.test('a schema keyword the grammar cannot enforce is refused with 400 naming it', async () => {
    const r = await post(base, '/api/generate', { model: 'stories', prompt: 'x', format: { type: 'object', properties: { id: { type: 'string', pattern: '^a' } } } })
    assert.equal(r.status, 400)
    assert.match(r.json.error, /"pattern" is not supported/)
    assert.match(r.json.error, /\$\.properties\.id/)
    const bad = await post(base, '/api/generate', { model: 'stories', prompt: 'x', format: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }, stream: false })
    assert.equal(bad.status, 400, bad.text)
    assert.match(bad.json.error, /invalid JSON schema/)
  })
})
