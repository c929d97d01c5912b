// [generation] relay = "worker": a remote model's request is relayed by the
// data-plane worker that received it; the control plane only admits it and
// counts its end. What shows it: the generation service's socket never sees
// the request (lb_gen_socket_requests_total stays 0), while with relay =
// "service" every request crosses it. Budgets stay exact across two workers
// (the admission is the control plane's), a client that disconnects closes
// the request to the model server, the usage metrics count the relayed
// requests, and a model the worker believes remote but the control plane
// serves locally (a stale listing) goes the old way and is served.

import assert from 'node:assert/strict'
import { once } from 'node:events'
import http from 'node:http'
import { test } from 'node:test'
import { MessageChannel } from 'node:worker_threads'
import OpenAI from 'openai'
import { tokenHash } from '../../core/auth/token-digest.js'
import { EdgeLink } from '../../core/gen/edge/link.js'
import type { EdgeToControl } from '../../core/gen/edge/messages.js'
import { startLb, waitFor } from '../helpers.js'
import { assertFloodStalls, startFakeOpenAi, within } from './fake-openai.js'
import { gatewayConfig, lbMetricIs, lines, openaiServers, STORIES, withinOneMinute } from './helpers.js'

const KEY = 'lb-relay-key-0123456789abcdefghij'
/** A key without limits: what the test does after it used up KEY's minute */
const FREE = 'lb-relay-free-0123456789abcdefghi'
const RPM = 10

const config = (url: string, relay: string): string => gatewayConfig({ stories: STORIES }, `${openaiServers({ fake: url })}
[[generation.keys]]
consumer = "shared"
hash = "${tokenHash(KEY)}"
rpm = ${RPM}
[[generation.keys]]
consumer = "free"
hash = "${tokenHash(FREE)}"
`, `relay = "${relay}"`)

/** A POST over its own connection (no keep-alive): each may land on either data-plane worker. */
function postAlone (url: string, body: string): Promise<{ status: number, retryAfter: string, text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent: false, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', connection: 'close' } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { text += c })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: String(res.headers['retry-after'] ?? ''), text }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

for (const relay of ['worker', 'service'] as const) {
  test(`relay = "${relay}": streams from a remote server in both APIs ${relay === 'worker' ? 'never cross' : 'cross'} the service's socket; usage is counted`, async (t) => {
    const fake = await startFakeOpenAi(t, ['remote-model'])
    const lb = await startLb(config(fake.url, relay), { workers: 2 })
    t.after(() => lb.stop())
    const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: KEY, maxRetries: 0 })
    for (let i = 0; i < 3; i++) {
      let text = ''
      let usage: OpenAI.CompletionUsage | null = null
      const stream = await client.chat.completions.create({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true } })
      for await (const c of stream) {
        text += c.choices[0]?.delta.content ?? ''
        if (c.usage) usage = c.usage
      }
      assert.equal(text, 'Hello there friend')
      assert.equal(usage?.completion_tokens, 3)
    }
    const r = await fetch(`${lb.url}/api/chat`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body: JSON.stringify({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }] }) })
    const ls = lines(await r.text())
    assert.equal(ls.map((l) => l.message?.content ?? '').join(''), 'Hello there friend')
    assert.equal(ls.at(-1).done, true)
    assert.equal(fake.bodies.length, 4)
    await lbMetricIs(lb, 'lb_gen_socket_requests_total', relay === 'worker' ? 0 : 4)
    await lbMetricIs(lb, 'lb_gen_requests_total{endpoint="chat",outcome="ok"}', 4)
    await lbMetricIs(lb, 'lb_gen_consumer_requests_total{consumer="shared"}', 4)
    const series = 'gen_ai_request_model="remote-model:latest",server="fake"'
    await lbMetricIs(lb, `lb_gen_model_requests_total{${series},outcome="ok"}`, 4)
    await lbMetricIs(lb, `lb_gen_model_tokens_total{${series},gen_ai_token_type="output"}`, 12)
    await lbMetricIs(lb, `gen_ai_server_time_to_first_token_seconds_count{${series}}`, 4)
    await lbMetricIs(lb, `lb_gen_model_in_flight{${series}}`, 0)
  })
}

test('relay = "worker", two workers: rpm holds exactly across them; a disconnect closes the upstream request; a client that stops reading slows the server; a stale listing goes the old way', async (t) => {
  // "stories" is listed by the server but is this machine's model too: the control plane serves it locally
  const fake = await startFakeOpenAi(t, ['remote-model', 'stories'])
  const lb = await startLb(config(fake.url, 'worker'), { workers: 2 })
  t.after(() => lb.stop())

  // 2 × RPM requests on their own connections (both workers): exactly RPM admitted, the rest 429 with Retry-After
  await withinOneMinute(async () => {
    const replies = await Promise.all(Array.from({ length: 2 * RPM }, () =>
      postAlone(`${lb.url}/v1/chat/completions`, '{"model":"remote-model","messages":[{"role":"user","content":"Hi"}],"stream":true}')))
    assert.equal(replies.filter((x) => x.status === 200).length, RPM, `statuses: ${replies.map((x) => x.status).join(' ')}`)
    const refused = replies.filter((x) => x.status === 429)
    assert.equal(refused.length, RPM)
    for (const x of refused) {
      assert.ok(Number(x.retryAfter) >= 1, 'Retry-After')
      assert.equal(JSON.parse(x.text).error.code, 'rate_limit_exceeded')
    }
  })
  assert.equal(fake.bodies.length, RPM, 'the refused requests never reached the server')
  await lbMetricIs(lb, 'lb_gen_consumer_rejections_total{consumer="shared",reason="rpm"}', RPM)

  // a client that disconnects mid-stream: the model server sees its request closed
  {
    fake.mode = 'hang'
    const closed = once(fake.events, 'closed')
    const ac = new AbortController()
    const res = await fetch(`${lb.url}/api/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${FREE}` },
      body: JSON.stringify({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
      signal: ac.signal,
    })
    const reader = res.body!.getReader()
    assert.match(Buffer.from((await reader.read()).value!).toString(), /Hello/)
    ac.abort()
    await within(closed, 10_000, 'close of the upstream request')
    fake.mode = 'ok'
  }
  await lbMetricIs(lb, 'lb_gen_socket_requests_total', 0)

  // a client that reads nothing more: the worker stops reading the server's reply instead of buffering it
  await assertFloodStalls(fake, (signal) => fetch(`${lb.url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${FREE}` }, body: JSON.stringify({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }], stream: true }), signal,
  }))

  // the worker's listing says "stories" is remote; the control plane has it here: served the old way, locally
  const before = fake.bodies.length
  const local = await fetch(`${lb.url}/api/generate`, { method: 'POST', headers: { authorization: `Bearer ${FREE}` }, body: JSON.stringify({ model: 'stories', prompt: 'Once', stream: false, options: { num_predict: 3 } }) })
  assert.equal(local.status, 200)
  const body = await local.json() as { done: boolean, eval_count: number }
  assert.equal(body.done, true)
  assert.ok(body.eval_count >= 1)
  assert.equal(fake.bodies.length, before, 'the remote server was not asked')
  await lbMetricIs(lb, 'lb_gen_socket_requests_total', 1)
})

test('relay = "worker": a failure before the first piece goes to the next server (asked once each), then the servers are down (503)', async (t) => {
  const first = await startFakeOpenAi(t, ['remote-model'])
  const second = await startFakeOpenAi(t, ['remote-model'])
  const lb = await startLb(gatewayConfig({}, openaiServers({ first: first.url, second: second.url }), 'relay = "worker"\nrequest_timeout = "2s"'), { workers: 2 })
  t.after(() => lb.stop())
  const client = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: 'none', maxRetries: 0 })
  const ask = (): Promise<OpenAI.ChatCompletion> => client.chat.completions.create({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }] })

  // both answer 500 in turn before their first piece: the request goes on to the other server, which is then down
  first.mode = 'fail500'
  second.mode = 'fail500'
  await assert.rejects(ask(), (e: unknown) => e instanceof OpenAI.APIError && e.status === 502 && /model server (first|second) failed: HTTP 500/.test(e.message))
  assert.equal(first.bodies.length + second.bodies.length, 2, 'each server was asked once')
  await assert.rejects(ask(), (e: unknown) => e instanceof OpenAI.APIError && e.status === 503 && /no model server serving remote-model:latest is up/.test(e.message))
  assert.equal(first.bodies.length + second.bodies.length, 2, 'servers marked down are not asked')
})

test('relay = "worker": a server dying mid-stream ends the stream in the caller\'s shape; request_timeout answers 504', async (t) => {
  const fake = await startFakeOpenAi(t, ['remote-model'])
  const lb = await startLb(gatewayConfig({}, openaiServers({ fake: fake.url }), 'relay = "worker"\nrequest_timeout = "2s"'), { workers: 2 })
  t.after(() => lb.stop())

  // Ollama's API: the stream's last line is the error
  fake.mode = 'die'
  const res = await fetch(`${lb.url}/api/chat`, { method: 'POST', body: JSON.stringify({ model: 'remote-model', messages: [{ role: 'user', content: 'Hi' }] }) })
  const reader = res.body!.getReader()
  let text = Buffer.from((await reader.read()).value!).toString()
  assert.match(text, /Hello/)
  fake.events.emit('go')
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value).toString()
  const ls = lines(text)
  assert.match(ls.at(-1).error, /model server fake failed: the reply broke off/)

  // no piece within request_timeout: 504 in OpenAI's shape; the server sees its request closed
  fake.mode = 'hang'
  const closed = once(fake.events, 'closed')
  const r = await fetch(`${lb.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'remote-model', prompt: 'Hi', stream: true }) })
  const body = await r.text()
  assert.equal(r.status, 200, 'the stream had begun with the first piece')
  assert.match(body, /"code":"LB_ERR_GEN_TIMEOUT"/)
  await within(closed, 10_000, 'close of the upstream request')
  await lbMetricIs(lb, 'lb_gen_requests_total{endpoint="generate",outcome="timeout"}', 1)
  await lbMetricIs(lb, 'lb_gen_requests_total{endpoint="chat",outcome="error"}', 1)
  await lbMetricIs(lb, 'lb_gen_socket_requests_total', 0)
})

test('a worker\'s question the control plane does not answer within the wait is given up; a late answer naming a server is given back', async () => {
  // the worker's side of the line, over a real MessageChannel whose other end answers too late
  const { port1, port2 } = new MessageChannel()
  const got: EdgeToControl[] = []
  port2.on('message', (m: EdgeToControl) => got.push(m))
  const link = new EdgeLink((m) => port1.postMessage(m), null, null, 50)
  const id = link.nextId()
  const answer = await link.ask({ kind: 'admit', id, consumer: 'addr:127.0.0.1', model: 'm', displayModel: 'm', reserve: 1, endpoint: 'chat', stream: true, arrived: process.hrtime.bigint() })
  assert.equal(answer, null)
  link.answer(id, { server: { name: 's', kind: 'openai', url: 'http://127.0.0.1:1', headers: {} }, served: 'm' })
  await waitFor(() => got.length === 2, 'the end of the late admission')
  assert.equal(got[0]!.kind, 'admit')
  assert.deepEqual({ ...got[1], end: 0n }, { kind: 'end', id, outcome: 'busy', refund: true, pieces: 0, first: 0n, end: 0n, result: null })
  port1.close()
  port2.close()
})

test('relay = "worker", SIGTERM: streams still relayed at drain_timeout end with LB_ERR_SHUTDOWN in their API\'s shape, the model server sees its requests closed, exit 0', async (t) => {
  const fake = await startFakeOpenAi(t, ['remote-model'])
  fake.mode = 'hang' // the first piece, then nothing until the connection closes
  const lb = await startLb(`[global]\ndrain_timeout = "1s"\naccess_log = "off"\n${config(fake.url, 'worker')}`, { workers: 2 })
  t.after(() => lb.stop('SIGKILL'))
  let closed = 0
  fake.events.on('closed', () => { closed++ })
  const open = async (path: string, body: object): Promise<{ first: string, rest: Promise<string> }> => {
    const res = await fetch(`${lb.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${FREE}` }, body: JSON.stringify({ model: 'remote-model', stream: true, ...body }) })
    assert.equal(res.status, 200)
    const reader = res.body!.getReader()
    const first = Buffer.from((await reader.read()).value!).toString()
    const rest = (async () => {
      let text = ''
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value).toString()
      return text
    })()
    return { first, rest }
  }
  const sse = await open('/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }] })
  const ndjson = await open('/api/generate', { prompt: 'Hi' })
  assert.match(sse.first + ndjson.first, /Hello[\s\S]*Hello/)
  lb.proc.kill('SIGTERM')
  const exit = await new Promise<{ code: number | null, signal: string | null }>((resolve) => lb.proc.once('exit', (code, signal) => resolve({ code, signal })))
  // OpenAI's stream: an error event; Ollama's: an error line; neither pretends the reply completed
  const events = (await sse.rest).split('\n\n').filter((e) => e.startsWith('data: '))
  assert.match(events.at(-1)!, /"code":"LB_ERR_SHUTDOWN"/)
  assert.ok(!events.some((e) => e === 'data: [DONE]'), 'a cut stream does not end with [DONE]')
  assert.match(lines(await ndjson.rest).at(-1).error, /lb is stopping/)
  assert.deepEqual(exit, { code: 0, signal: null }, lb.log())
  assert.match(lb.log(), /"msg":"drain_timeout reached: requests cut","cut":2/)
  await waitFor(() => closed === 2, 'the model server to see both requests closed', 5000, 20)
})

test('relay = "worker": hostile bodies for a remote model get the service\'s 400 in the caller\'s shape and never reach the server; a body over the worker\'s parse bound is served the old way', async (t) => {
  const fake = await startFakeOpenAi(t, ['remote-model'])
  const lb = await startLb(config(fake.url, 'worker').replace('relay = "worker"', 'relay = "worker"\nmax_prompt_bytes = 4194304'), { workers: 2 })
  t.after(() => lb.stop())
  const post = async (path: string, body: string): Promise<{ status: number, json: { error: unknown } }> => {
    const r = await fetch(`${lb.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${FREE}` }, body })
    return { status: r.status, json: await r.json() as { error: unknown } }
  }
  const hostile = [
    '{"model":"remote-model","messages":"Hi"',
    '{"model":"remote-model","messages":"Hi"}',
    '{"model":"remote-model","messages":[{"role":"wizard","content":"Hi"}]}',
    '{"model":"remote-model","messages":[{"role":"user","content":"Hi"}],"n":1000000}',
    '{"model":["remote-model"],"messages":[{"role":"user","content":"Hi"}]}',
    '{"model":"remote-model","messages":[{"role":"user","content":"Hi"}],"max_tokens":"lots"}',
  ]
  for (const body of hostile) {
    const openai = await post('/v1/chat/completions', body)
    assert.equal(openai.status, 400, body)
    const e = openai.json.error as { message: string, type: string }
    assert.equal(typeof e.message, 'string', body)
    assert.equal(e.type, 'invalid_request_error', body)
  }
  const ollama = await post('/api/chat', '{"model":"remote-model","messages":[{"role":"user","content":7}]}')
  assert.equal(ollama.status, 400)
  assert.equal(typeof ollama.json.error, 'string')
  assert.equal(fake.bodies.length, 0, 'no hostile body reached the model server')
  await lbMetricIs(lb, 'lb_gen_socket_requests_total', hostile.length + 1)
  // 2 MiB of prompt: past the 1 MiB the worker parses, the service reads it and relays it itself
  const big = await fetch(`${lb.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${FREE}` }, body: JSON.stringify({ model: 'remote-model', messages: [{ role: 'user', content: 'x'.repeat(2 << 20) }] }) })
  assert.equal(big.status, 200)
  assert.equal((await big.json() as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content, 'Hello there friend')
  assert.equal(fake.bodies.length, 1)
  await lbMetricIs(lb, 'lb_gen_socket_requests_total', hostile.length + 2)
})
