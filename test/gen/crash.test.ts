// Isolation: the hostile fixture aborts its whole process when it tokenizes
// "{". The API process must survive: requests in flight get a clear 500 (or a
// final error line when their stream had begun), the runner is restarted,
// and everything works again afterwards.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { request } from 'undici'
import { get, lines, post, startGen, until } from './helpers.js'

test('a model that aborts its process does not take the service down', async (t) => {
  const { base, svc } = await startGen(t)
  await svc.ready()
  const pid = svc.runnerPid()
  assert.ok(pid > 0)

  // The hostile model works on harmless input.
  const fine = await post(base, '/api/generate', { model: 'hostile', prompt: 'Once upon a time', stream: false, options: { num_predict: 8 } })
  assert.equal(fine.status, 200)

  // A stream of another model is in flight when the crash happens.
  const inflight = await request(`${base}/api/generate`, {
    method: 'POST', body: JSON.stringify({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 1900 } }),
  })
  const it = inflight.body[Symbol.asyncIterator]()
  let streamed = String((await it.next()).value)

  const crash = await post(base, '/api/generate', { model: 'hostile', prompt: 'a { b', stream: false })
  assert.equal(crash.status, 500)
  assert.match(crash.json.error, /model runner process crashed \(signal SIGABRT\); it is being restarted/)

  for (let c = await it.next(); c.done !== true; c = await it.next()) streamed += String(c.value)
  assert.equal(inflight.statusCode, 200)
  const last = lines(streamed).pop()
  assert.match(last.error, /crashed/, 'the stream that had begun ends with an error line')

  // The API process kept answering, and a new runner takes over.
  assert.equal((await get(base, '/api/version')).status, 200)
  await until(() => svc.runnerPid() !== 0 && svc.runnerPid() !== pid, 10_000, 'a new runner')
  await svc.ready()
  const after = await post(base, '/api/generate', { model: 'stories', prompt: 'Hello', stream: false, options: { num_predict: 5 } })
  assert.equal(after.status, 200)
  assert.equal(after.json.eval_count, 5)

  // A second crash is survived the same way (with back-off); the counter follows.
  const again = await post(base, '/api/chat', { model: 'hostile', messages: [{ role: 'user', content: '{' }], stream: false })
  assert.equal(again.status, 500)
  await until(() => svc.stats().runnerRestarts === 2, 10_000, 'second restart')
  await svc.ready()
  assert.equal((await post(base, '/api/generate', { model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 2 } })).status, 200)
  assert.ok(svc.stats().requests.generate.error >= 2)
})
