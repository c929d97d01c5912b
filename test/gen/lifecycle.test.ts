// Scheduling behaviour of the real service: a client that disconnects stops
// its generation (its sequence is free for the next request), the bounded
// queue answers 503, the per-request time-out, keep-alive expiry, and
// concurrent requests decoded together rather than one after another.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { get, lines, post, startGen, until } from './helpers.js'

const LONG = { model: 'stories', prompt: 'Once upon a time', options: { num_predict: 1900, temperature: 1, seed: 3 } }

/** Starts a streamed generation and resolves once its first chunk arrived; abort() drops the connection. */
async function streaming (base: string, body: unknown): Promise<{ abort: () => void, rest: Promise<string>, received: () => number }> {
  const ac = new AbortController()
  const r = await request(`${base}/api/generate`, { method: 'POST', body: JSON.stringify(body), signal: ac.signal })
  let text = ''
  let first: () => void = () => undefined
  const gotFirst = new Promise<void>((resolve) => { first = resolve })
  const rest = (async () => {
    try {
      for await (const c of r.body) { text += c.toString(); first() }
    } catch { /* aborted */ }
    first()
    return text
  })()
  await gotFirst
  return { abort: () => ac.abort(), rest, received: () => text.split('\n').length - 1 }
}

test('a client that disconnects stops its generation and frees its sequence', async (t) => {
  const { base, svc } = await startGen(t, { parallel: 1, contexts: 1 })
  const a = await streaming(base, LONG)
  const before = svc.stats().tokens
  a.abort()
  await a.rest
  // Capacity is one sequence: this request can only run once the first one stopped.
  const b = await post(base, '/api/generate', { model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 5 } })
  assert.equal(b.status, 200)
  assert.equal(b.json.eval_count, 5)
  const stopped = svc.stats().tokens - before - 5
  assert.ok(stopped < 1900 / 2, `the cancelled job generated ${stopped} tokens, client had ${a.received()} chunks`)
  assert.equal(svc.stats().requests.generate.cancelled, 1)
  assert.equal(svc.stats().inFlight, 0)
})

test('the bounded queue answers 503 as Ollama does, then drains', async (t) => {
  const { base, svc } = await startGen(t, { parallel: 1, contexts: 1, max_queue: 1 })
  const a = await streaming(base, LONG)
  const queued = request(`${base}/api/generate`, { method: 'POST', body: JSON.stringify({ ...LONG, stream: false }) })
  await until(() => svc.stats().queueDepth === 1, 5000, 'a queued request')
  const c = await post(base, '/api/generate', { model: 'stories', prompt: 'x' })
  assert.equal(c.status, 503)
  assert.deepEqual(c.json, { error: 'server busy, please try again.  maximum pending requests exceeded' })
  assert.equal(svc.stats().requests.generate.busy, 1)
  a.abort()
  const q = await queued
  assert.equal(q.statusCode, 200, 'the queued request runs once the first one is gone')
  await q.body.dump()
  await until(() => svc.stats().queueDepth === 0 && svc.stats().inFlight === 0, 5000, 'an empty queue')
})

test('request_timeout: 504 before the reply started, a final error line after', async (t) => {
  const { base, svc } = await startGen(t, { request_timeout: '400ms', parallel: 1, contexts: 1 })
  await svc.ready()
  assert.equal((await post(base, '/api/generate', { model: 'stories' })).json.done_reason, 'load')
  const r = await post(base, '/api/generate', { ...LONG, options: { ...LONG.options, num_predict: 100_000 }, stream: false })
  assert.equal(r.status, 504)
  assert.match(r.json.error, /timed out after 0\.4s/)
  // the stopped job has left its sequence: the next one's 400 ms are its own, not spent queued behind it
  await until(() => svc.stats().inFlight === 0, 5000, 'the timed-out job to stop')
  const s = await post(base, '/api/generate', { ...LONG, options: { ...LONG.options, num_predict: 100_000 } })
  assert.equal(s.status, 200)
  const last = lines(s.text).pop()
  assert.match(last.error, /timed out/)
  const ok = await post(base, '/api/generate', { model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 3 } })
  assert.equal(ok.status, 200, 'the timed-out jobs released their sequence')
  assert.equal(svc.stats().requests.generate.timeout, 2)
})

test('keep_alive: an idle model is unloaded when its keep-alive expires', async (t) => {
  const { base } = await startGen(t)
  // 2 s: the first load of the other model below must not outlast it (300 ms once could, on a busy machine)
  await post(base, '/api/generate', { model: 'random', prompt: 'x', keep_alive: '2s', stream: false, options: { num_predict: 2 } })
  await post(base, '/api/generate', { model: 'stories', prompt: 'x', keep_alive: -1, stream: false, options: { num_predict: 2 } })
  const ps = await get(base, '/api/ps')
  assert.equal(ps.json.models.length, 2)
  await until(async () => (await get(base, '/api/ps')).json.models.length === 1, 5000, 'expiry')
  const left = (await get(base, '/api/ps')).json.models[0]
  assert.equal(left.name, 'stories:latest')
  assert.ok(new Date(left.expires_at).getFullYear() > 2200, 'keep_alive -1 = forever')
})

test('concurrent requests for one model are decoded together, not one after another', async (t) => {
  const { base } = await startGen(t, { parallel: 4, contexts: 1 })
  await post(base, '/api/generate', { model: 'stories', prompt: 'warm', stream: false, options: { num_predict: 1 } })
  const firstChunkAt: number[] = []
  const doneAt: number[] = []
  await Promise.all([0, 1, 2, 3].map(async (i) => {
    const r = await request(`${base}/api/generate`, { method: 'POST', body: JSON.stringify({ ...LONG, options: { num_predict: 400, seed: i } }) })
    let first = true
    for await (const c of r.body) {
      void c
      if (first) { firstChunkAt.push(performance.now()); first = false }
    }
    doneAt.push(performance.now())
  }))
  assert.ok(Math.max(...firstChunkAt) < Math.min(...doneAt), 'every request streamed before any finished')
})
