// A real client nobody here wrote: the official `ollama` npm package, pointed
// at the service's TCP listener, used exactly as its README shows.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Ollama } from 'ollama'
import { startGen } from './helpers.js'

test('the official ollama client works unchanged', async (t) => {
  const { base } = await startGen(t)
  const ollama = new Ollama({ host: base })

  await t.test('generate, stream false', async () => {
    const r = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', stream: false, options: { num_predict: 12, seed: 1 } })
    assert.equal(r.done, true)
    assert.ok((r.response ?? '').length > 0)
    assert.equal(r.eval_count, 12)
    assert.ok(r.eval_duration > 0)
    // The client types say Date; on the wire (and at run time) it is the RFC 3339 string.
    assert.ok(!Number.isNaN(new Date(r.created_at as unknown as string).getTime()))
  })

  await t.test('generate, stream true', async () => {
    const parts: string[] = []
    let final = null
    for await (const part of await ollama.generate({ model: 'stories', prompt: 'Once upon a time', stream: true, options: { num_predict: 12, seed: 1 } })) {
      if (part.done) final = part
      else parts.push(part.response ?? '')
    }
    assert.ok(parts.length > 1)
    assert.ok(final !== null)
    assert.equal(final.eval_count, 12)
  })

  await t.test('format json', async () => {
    const r = await ollama.generate({ model: 'stories', prompt: 'A cat as JSON:', format: 'json', stream: false, options: { seed: 2 } })
    assert.equal(typeof JSON.parse(r.response ?? ''), 'object')
  })

  await t.test('chat, both ways', async () => {
    const r = await ollama.chat({ model: 'stories', messages: [{ role: 'user', content: 'Tell me a story.' }], options: { num_predict: 8 } })
    assert.equal(r.message.role, 'assistant')
    assert.equal(r.done, true)
    let n = 0
    // greedy: a sampled reply may end at its first token (n would be 0)
    for await (const part of await ollama.chat({ model: 'lb-tiny', messages: [{ role: 'user', content: 'hi' }], stream: true, options: { num_predict: 8, temperature: 0 } })) {
      if (!part.done) n++
    }
    assert.ok(n > 0)
  })

  await t.test('list (tags), show, ps, version, and errors as exceptions', async () => {
    const list = await ollama.list()
    assert.ok(list.models.some((m) => m.name === 'stories:latest' && m.details.format === 'gguf'))
    const show = await ollama.show({ model: 'stories' })
    assert.equal(show.details.family, 'llama')
    const ps = await ollama.ps()
    assert.ok(ps.models.some((m) => m.name === 'stories:latest'))
    assert.match((await ollama.version()).version, /^\d/)
    await assert.rejects(ollama.generate({ model: 'no-such-model', prompt: 'x', stream: false }), /model 'no-such-model' not found/)
  })
})
