// lb's connections to model servers (core/gen/remote/http-call.ts: the data
// plane's own HTTP/1.1 client, in the worker that relays a reply and in the
// generation service alike): they are kept alive and reused; one the server
// closes just as a request goes out on it is not the server's failure (the
// request goes again on a new connection, the server stays up); an https://
// server's certificate is verified and its stream relayed; a server that
// cannot be reached is named with the reason.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import OpenAI from 'openai'
import { startLb } from '../helpers.js'
import { makeCerts } from '../tls/certs.js'
import { startFakeOpenAi } from './fake-openai.js'
import { gatewayConfig, openaiServers } from './helpers.js'

const ask = async (client: OpenAI, stream: boolean): Promise<string> => {
  if (!stream) return (await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] })).choices[0]!.message.content ?? ''
  let text = ''
  for await (const c of await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], stream: true })) text += c.choices[0]?.delta.content ?? ''
  return text
}

for (const relay of ['worker', 'service'] as const) {
  test(`relay = "${relay}": connections to a model server are reused; one it drops as a request goes out is not its failure`, async (t) => {
    const fake = await startFakeOpenAi(t, ['m'])
    // one worker: one pool of connections to the server
    const lb = await startLb(gatewayConfig({}, openaiServers({ fake: fake.url }), `relay = "${relay}"`), { workers: 1 })
    t.after(() => lb.stop())
    const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: 'none', maxRetries: 0 })
    for (let i = 0; i < 6; i++) assert.equal(await ask(client, i % 2 === 0), 'Hello there friend')
    assert.equal(fake.connections.size, 1, 'six requests one after another went on one kept-alive connection')

    // Each request now finds its kept connection closed under it: it goes again on a new one. Before, undici's
    // request failed ("other side closed"): a 502, and the server marked down for a race of its idle timer.
    fake.mode = 'drop-kept'
    for (let i = 0; i < 3; i++) assert.equal(await ask(client, i % 2 === 0), 'Hello there friend')
    assert.equal(fake.dropped, 3)
    fake.mode = 'ok'
    assert.equal(await ask(client, true), 'Hello there friend', 'the server was not marked down')
    assert.doesNotMatch(lb.log(), /could not serve|marked down/)
  })
}

test('an https:// model server: its certificate is verified (NODE_EXTRA_CA_CERTS here) and its stream relayed', async (t) => {
  const certs = makeCerts()
  const fake = await startFakeOpenAi(t, ['m'], certs.server)
  const lb = await startLb(gatewayConfig({}, openaiServers({ fake: fake.url })), { workers: 1, env: { NODE_EXTRA_CA_CERTS: certs.ca } })
  t.after(() => lb.stop())
  const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: 'none', maxRetries: 0 })
  assert.equal(await ask(client, true), 'Hello there friend')
  assert.equal(await ask(client, false), 'Hello there friend')
  assert.equal(fake.connections.size, 1)
})

test('a model server that stopped listening: the 502 names the reason, in node\'s words', async (t) => {
  const fake = await startFakeOpenAi(t, ['m'])
  const lb = await startLb(gatewayConfig({}, openaiServers({ fake: fake.url })), { workers: 1 })
  t.after(() => lb.stop())
  const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: 'none', maxRetries: 0 })
  assert.equal(await ask(client, true), 'Hello there friend')
  await fake.close()
  await assert.rejects(ask(client, true), (e: unknown) => e instanceof OpenAI.APIError && e.status === 502 &&
    new RegExp(`model server fake failed: connect ECONNREFUSED 127\\.0\\.0\\.1:${new URL(fake.url).port}`).test(e.message))
})
