// Hostile and heavy generation requests: one large prompt
// must not stop generation for everyone, every per-request cost has a limit
// with a clear error naming it, a time-out really frees the runner, and a bad
// `context` token is a 400 that leaves the runner alive.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { post, startGen, until } from './helpers.js'

const MB = 1 << 20
/** A prompt of `bytes` bytes, non-ASCII so that every model falls back to byte tokens for part of it. */
const bigPrompt = (bytes: number): string => 'the cat sat on the mat. 日本語の猫 🙂 '.repeat(Math.ceil(bytes / 40)).slice(0, bytes)

/** Runs `f` and returns its result with the milliseconds it took. */
async function timed<T> (f: () => Promise<T>): Promise<[T, number]> {
  const t = Date.now()
  const r = await f()
  return [r, Date.now() - t]
}

test('a prompt of several MB is refused at once by the default max_prompt_bytes, naming the limit', async (t) => {
  const { base, svc } = await startGen(t)
  await svc.ready()
  const [r, ms] = await timed(() => post(base, '/api/generate', { model: 'lb-tiny', prompt: 'x'.repeat(5 * MB), stream: false }))
  assert.equal(r.status, 413, r.text)
  assert.equal(r.json.error, `prompt of ${5 * MB} bytes is larger than the limit generation.max_prompt_bytes = ${MB}`)
  assert.ok(ms < 5_000, `answered in ${ms} ms`)
  // chat counts every message
  const c = await post(base, '/api/chat', { model: 'lb-tiny', messages: [{ role: 'user', content: 'x'.repeat(MB) }, { role: 'user', content: 'y' }], stream: false })
  assert.equal(c.status, 413)
})

test('a chat of 50,000 messages costs what the context holds: old messages are dropped', async (t) => {
  const { base, svc } = await startGen(t)
  await svc.ready()
  const messages = Array.from({ length: 50_000 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: `message ${i}` }))
  const [r, ms] = await timed(() => post(base, '/api/chat', { model: 'stories', messages, stream: false, options: { num_predict: 2 } }))
  assert.equal(r.status, 200, r.text)
  assert.equal(r.json.prompt_truncated, true)
  assert.ok(ms < 5_000, `answered in ${ms} ms`)
})

test('a 4 MB prompt is cut to its end quickly, and another client is answered meanwhile', async (t) => {
  const { base, svc } = await startGen(t, { max_prompt_bytes: '8M', num_ctx: 512 })
  await svc.ready()
  for (const model of ['lb-tiny', 'stories']) {
    const prompt = bigPrompt(4 * MB)
    const big = timed(() => post(base, '/api/generate', { model, prompt, stream: false, options: { num_predict: 4, seed: 1 } }))
    // Another client, sent while the big prompt is being handled.
    const [small, smallMs] = await timed(() => post(base, '/api/generate', { model, prompt: 'Hello', stream: false, options: { num_predict: 4 } }))
    const [r, ms] = await big
    assert.equal(small.status, 200, small.text)
    assert.ok(smallMs < 5_000, `${model}: the other client waited ${smallMs} ms`)
    assert.equal(r.status, 200, r.text.slice(0, 200))
    assert.ok(ms < 10_000, `${model}: 4 MB answered in ${ms} ms`)
    assert.equal(r.json.prompt_truncated, true)
    assert.ok(r.json.prompt_eval_count <= 461, `${model}: ${r.json.prompt_eval_count} prompt tokens`)
    assert.equal(small.json.prompt_truncated, undefined, 'a prompt that fits says nothing')
    // The kept end is the prompt's end: the returned context ends with the prompt's last tokens.
    assert.ok(r.json.context.length <= 512)
  }
  // Without max_prompt_tokens, what the context leaves for a reply is the limit.
  const ctx = await post(base, '/api/generate', { model: 'lb-tiny', prompt: bigPrompt(9000), stream: false, truncate: false })
  assert.equal(ctx.status, 400)
  assert.equal(ctx.json.error, 'the input is longer than the limit of 460 tokens (num_ctx 512) and "truncate" is false')
})

test('prompt tokens: max_prompt_tokens keeps the end; "truncate": false refuses naming the limit', async (t) => {
  const { base, svc } = await startGen(t, { max_prompt_tokens: 100 })
  await svc.ready()
  const prompt = bigPrompt(20_000)
  const r = await post(base, '/api/generate', { model: 'stories', prompt, stream: false, options: { num_predict: 2 } })
  assert.equal(r.status, 200, r.text)
  assert.equal(r.json.prompt_truncated, true)
  assert.equal(r.json.prompt_eval_count, 101, 'the limit plus BOS')
  const no = await post(base, '/api/generate', { model: 'stories', prompt, stream: false, truncate: false })
  assert.equal(no.status, 400)
  assert.equal(no.json.error, 'the input is longer than the limit of 100 tokens (generation.max_prompt_tokens) and "truncate" is false')
  const chat = await post(base, '/api/chat', { model: 'stories', messages: [{ role: 'user', content: prompt }], stream: false, truncate: false })
  assert.equal(chat.status, 400)
  const fits = await post(base, '/api/generate', { model: 'stories', prompt: 'Once upon a time', stream: false, truncate: false, options: { num_predict: 2 } })
  assert.equal(fits.status, 200)
})

test('num_predict above max_num_predict is a 400 naming the limit; unset, it is the cap', async (t) => {
  const { base, svc } = await startGen(t, { max_num_predict: 50 })
  await svc.ready()
  const r = await post(base, '/api/generate', { model: 'random', prompt: 'x', stream: false, options: { num_predict: 51 } })
  assert.equal(r.status, 400)
  assert.equal(r.json.error, 'invalid value for "options.num_predict": 51 is over the limit generation.max_num_predict = 50')
  const capped = await post(base, '/api/generate', { model: 'random', prompt: 'x', stream: false, options: { seed: 1 } })
  assert.equal(capped.status, 200)
  assert.ok(capped.json.eval_count <= 50, `${capped.json.eval_count} tokens`)
  assert.equal((await post(base, '/api/generate', { model: 'random', prompt: 'x', stream: false, options: { num_predict: 50 } })).status, 200)
})

test('a context token outside the vocabulary is a 400 naming the field; the runner survives', async (t) => {
  const { base, svc } = await startGen(t)
  await svc.ready()
  const pid = svc.runnerPid()
  for (const model of ['stories', 'lb-tiny', 'random']) {
    const r = await post(base, '/api/generate', { model, prompt: 'Hello', context: [1, 999999], stream: false })
    assert.equal(r.status, 400, r.text)
    assert.match(r.json.error, /^invalid value for "context": token 999999 is not in the vocabulary of model \S+ \(ids 0 to \d+\)$/)
  }
  const ok = await post(base, '/api/generate', { model: 'stories', prompt: 'Hello', context: [1, 2, 3], stream: false, options: { num_predict: 2 } })
  assert.equal(ok.status, 200, ok.text)
  assert.equal(svc.runnerPid(), pid)
})

test('request_timeout stops the work: the next request is served', async (t) => {
  // 1.5 s: long enough for a model load on a busy machine, about half of the fastest 4,000-token reply seen
  // (2.8 s on a quiet machine; 4,094 tokens is as long as a reply gets, the model's context being 4,096).
  const { base, svc } = await startGen(t, { request_timeout: '1500ms', parallel: 1, contexts: 1, cancel_grace: '1s' })
  await svc.ready()
  // Load the model first, so that the time-out falls in the generation.
  assert.equal((await post(base, '/api/generate', { model: 'random', prompt: 'x', stream: false, options: { num_predict: 1 } })).status, 200)

  await t.test('a long generation is stopped at the time-out and frees its sequence', async () => {
    const pid = svc.runnerPid()
    const [r, ms] = await timed(() => post(base, '/api/generate', { model: 'random', prompt: 'x', stream: false, options: { num_predict: 4000, num_ctx: 4096 } }))
    assert.equal(r.status, 504, r.text)
    assert.equal(r.json.error, 'request timed out after 1.5s (generation.request_timeout)')
    assert.ok(ms < 3_000, `504 after ${ms} ms`)
    const [next, nextMs] = await timed(() => post(base, '/api/generate', { model: 'random', prompt: 'y', stream: false, options: { num_predict: 2 } }))
    assert.equal(next.status, 200)
    assert.ok(nextMs < 2_000, `the next request waited ${nextMs} ms`)
    assert.equal(svc.runnerPid(), pid, 'a job that stops in time costs no restart')
  })

  await t.test('a runner that does not stop the job within cancel_grace is killed and restarted', async () => {
    const pid = svc.runnerPid()
    // A stopped process stands for a native call that no abort signal reaches.
    process.kill(pid, 'SIGSTOP')
    const r = await post(base, '/api/generate', { model: 'random', prompt: 'x', stream: false, options: { num_predict: 4 } })
    assert.equal(r.status, 504)
    await until(() => svc.runnerPid() !== 0 && svc.runnerPid() !== pid, 5_000, 'a new runner')
    await svc.ready()
    const next = await post(base, '/api/generate', { model: 'random', prompt: 'y', stream: false, options: { num_predict: 2 } })
    assert.equal(next.status, 200, next.text)
  })
})
