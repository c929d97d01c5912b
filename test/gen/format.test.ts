// Structured output: with `format`, the reply always parses (and matches the
// schema) unless num_predict cut it, in which case done_reason is "length".
// Each model x seed runs with the default budget (the whole context), where
// an unconstrained tiny model would ramble for thousands of tokens.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { lines, post, schemaMismatch, startGen } from './helpers.js'

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 40 },
    age: { type: 'integer' },
    pets: { type: 'array', items: { type: 'string', enum: ['cat', 'dog', 'fish'] }, maxItems: 3 },
    alive: { type: 'boolean' },
  },
  required: ['name', 'age', 'pets', 'alive'],
  additionalProperties: false,
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

  await t.test('cut by num_predict: done_reason is length', async () => {
    const r = await post(base, '/api/generate', { model: 'stories', prompt: 'x', format: 'json', stream: false, options: { num_predict: 3, seed: 1 } })
    assert.equal(r.json.done_reason, 'length')
    assert.equal(r.json.eval_count, 3)
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
