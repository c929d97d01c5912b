// [generation] relay = "worker": a data-plane worker that dies while it relays
// a remote model's stream takes its requests with it: their clients are cut,
// and the control plane ends them as cancelled (from their end messages, which
// the thread's exit still sends, or core/gen/remote/broker.ts dropWorker when
// it could send none): the model server sees its request closed, the
// consumer's requests in flight and the server's in-flight count go back to 0,
// and the restarted worker relays the next request.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { tokenHash } from '../../core/auth/token-digest.js'
import { crashRouter, startLb, waitFor } from '../helpers.js'
import { startFakeOpenAi, within } from './fake-openai.js'
import { gatewayConfig, lbMetric, lbMetricIs, openaiServers } from './helpers.js'

const KEY = 'lb-relay-exit-0123456789abcdefghij'

test('relay = "worker": a worker that dies mid-stream ends its relayed requests at the control plane; the next one is served', async (t) => {
  const fake = await startFakeOpenAi(t, ['remote-model'])
  // one worker: the stream and the request that ends the worker land on the same thread
  const lb = await startLb(gatewayConfig({}, `${openaiServers({ fake: fake.url })}
[[generation.keys]]
consumer = "one"
hash = "${tokenHash(KEY)}"
max_in_flight = 1
${crashRouter('gen')}`, 'relay = "worker"'), { workers: 1 })
  t.after(() => lb.stop())
  const ask = (): Promise<Response> => fetch(`${lb.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body: JSON.stringify({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
  })

  fake.mode = 'hang' // the first piece, then nothing until the connection closes
  const closed = new Promise((resolve) => fake.events.once('closed', resolve))
  const res = await ask()
  const reader = res.body!.getReader()
  assert.match(Buffer.from((await reader.read()).value!).toString(), /Hello/)
  // the key's one request in flight: a second is refused while the stream runs
  assert.equal((await ask()).status, 429)

  await fetch(`${lb.url}/crash`).catch(() => undefined) // the worker exits; its connections with it
  await assert.rejects(async () => { for (let r = await reader.read(); !r.done; r = await reader.read()); }, 'the stream is cut, not ended')
  await within(closed, 10_000, 'close of the upstream request')
  await lbMetricIs(lb, 'lb_gen_model_in_flight{gen_ai_request_model="remote-model:latest",server="fake"}', 0)

  // the restarted worker relays the next request: the key's slot was given back
  fake.mode = 'ok'
  let status = 0
  await waitFor(async () => {
    const r = await ask().catch(() => null)
    status = r?.status ?? 0
    if (r !== null) await r.text()
    return status !== 0
  }, 'the restarted worker to answer', 10_000, 50)
  assert.equal(status, 200)
  assert.equal(await lbMetric(lb, 'lb_gen_socket_requests_total'), 0, 'every request was relayed in the worker')
})
