// Who admits a remote model's request relayed in a data-plane worker
// (core/gen/edge/link.ts pick, core/gen/remote/broker.ts): an admitted request
// needs no question to the control plane, so the worker picks the
// server itself from its listing and the requests in flight in shared memory
// (core/shm/model-inflight.ts), exact across workers; a consumer with limits
// is admitted there too, on its budget in shared memory (core/shm/budget-records.ts).
// A refusal (over budget, a model off the allow-list) is the control plane's.
// lb_gen_relay_admissions_total says which way each went.

import assert from 'node:assert/strict'
import { request } from 'node:http'
import { type TestContext, test } from 'node:test'
import OpenAI from 'openai'
import { tokenHash } from '../../core/auth/token-digest.js'
import { type Lb, startLb, waitFor } from '../helpers.js'
import { type FakeOpenAi, type Mode, startFakeOpenAi } from './fake-openai.js'
import { gatewayConfig, lbMetric, openaiServers, withinOneMinute } from './helpers.js'

const LIMITED = 'lb-limited-key-0123456789abcdefgh'
const FREE = 'lb-free-key-0123456789abcdefghijk'
const OTHER_MODEL = 'lb-other-model-0123456789abcdefgh'
const ONE = 'lb-one-at-a-time-0123456789abcdefg'
const LIMITED_RPM = 12
const ANON_RPM = 5

/** A stream on a connection of its own (so that the kernel spreads them over the workers), open until closed. */
function openStream (url: string, key: string): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], stream: true })
    const req = request(`${url}/v1/chat/completions`, {
      method: 'POST', agent: false, headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`))
      // the first chunk came: the request is at its server, counted in flight there
      res.once('data', () => resolve(() => req.destroy()))
    })
    req.on('error', () => undefined)
    req.end(body)
  })
}

const held = (a: FakeOpenAi, b: FakeOpenAi): [number, number] => [a.bodies.length, b.bodies.length]

/** Two servers of model m that hold every stream open, behind lb with two workers and no keys. */
async function twoServers (t: TestContext): Promise<{ a: FakeOpenAi, b: FakeOpenAi, lb: Lb }> {
  const a = await startFakeOpenAi(t, ['m'])
  const b = await startFakeOpenAi(t, ['m'])
  a.mode = b.mode = 'hang'
  const lb = await startLb(gatewayConfig({}, openaiServers({ a: a.url, b: b.url })), { workers: 2 })
  t.after(() => lb.stop())
  return { a, b, lb }
}

test('a consumer without limits is admitted in the worker; the server with the fewest in flight is picked across workers', async (t) => {
  const { a, b, lb } = await twoServers(t)
  const closes: Array<() => void> = []
  const toB: Array<() => void> = []
  // one stream at a time, each held open: with the counts shared, each goes where fewer are in flight
  for (let i = 1; i <= 12; i++) {
    const before = b.bodies.length
    const close = await openStream(lb.url, 'none')
    closes.push(close)
    if (b.bodies.length > before) toB.push(close)
    const [na, nb] = held(a, b)
    assert.ok(Math.abs(na - nb) <= 1 && na + nb === i, `after ${i} streams: a ${na}, b ${nb}`)
  }
  assert.equal(await lbMetric(lb, 'lb_gen_relay_admissions_total{by="worker"}'), 12)
  assert.equal(await lbMetric(lb, 'lb_gen_relay_admissions_total{by="control_plane"}'), 0)

  // the ends give the counts back: b's six close, and the next four all go to b
  let closed = 0
  a.events.on('closed', () => closed++)
  b.events.on('closed', () => closed++)
  for (const c of toB) c()
  await waitFor(() => closed === 6 ? true : null, 'the six streams to close at the servers')
  // the control plane hears each end as a message: wait until it counted them (the model's in flight)
  await waitFor(async () => await lbMetric(lb, 'lb_gen_requests_total{endpoint="chat",outcome="cancelled"}') === 6 ? true : null, 'six cancelled')
  for (let i = 0; i < 4; i++) closes.push(await openStream(lb.url, 'none'))
  assert.deepEqual(held(a, b), [6, 10], 'the four new streams went to b, where none were in flight any more')
  for (const c of closes) c()
})

/** A POST on a connection of its own (the kernel spreads them over the workers), with `key` unless '': its status. */
function postAlone (url: string, key: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const auth = key === '' ? {} : { authorization: `Bearer ${key}` }
    const req = request(url, { method: 'POST', agent: false, headers: { ...auth, 'content-type': 'application/json', connection: 'close' } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end(body)
  })
}

test('a consumer with limits is admitted in the worker on the budget in shared memory, exact across workers; refusals are the control plane\'s', async (t) => {
  const fake = await startFakeOpenAi(t, ['m'])
  const lb = await startLb(gatewayConfig({}, `${openaiServers({ fake: fake.url })}
[[generation.keys]]
consumer = "limited"
hash = "${tokenHash(LIMITED)}"
rpm = ${LIMITED_RPM}
[[generation.keys]]
consumer = "one-at-a-time"
hash = "${tokenHash(ONE)}"
max_in_flight = 1
[[generation.keys]]
consumer = "free"
hash = "${tokenHash(FREE)}"
[[generation.keys]]
consumer = "other-model"
hash = "${tokenHash(OTHER_MODEL)}"
models = ["n"]
[generation.auth]
required = false
rpm = ${ANON_RPM}
`), { workers: 2 })
  t.after(() => lb.stop())
  const chat = '{"model":"m","messages":[{"role":"user","content":"Hi"}]}'
  await withinOneMinute(async () => {
    const statuses = await Promise.all(Array.from({ length: 40 }, () => postAlone(`${lb.url}/v1/chat/completions`, LIMITED, chat)))
    assert.equal(statuses.filter((s) => s === 200).length, LIMITED_RPM, `statuses: ${statuses.join(' ')}`)
    assert.equal(statuses.filter((s) => s === 429).length, 40 - LIMITED_RPM)
  })
  assert.equal(await lbMetric(lb, 'lb_gen_relay_admissions_total{by="worker"}'), LIMITED_RPM)
  assert.equal(await lbMetric(lb, 'lb_gen_consumer_rejections_total{consumer="limited",reason="rpm"}'), 40 - LIMITED_RPM)
  assert.equal(await lbMetric(lb, 'lb_gen_consumer_requests_total{consumer="limited"}'), LIMITED_RPM)
  assert.equal(await lbMetric(lb, 'lb_gen_relay_admissions_total{by="control_plane"}'), 0)

  // in flight: admitted in a worker, ended through the control plane (the end message charges the worker's ticket)
  fake.mode = 'hang'
  const close = await openStream(lb.url, ONE)
  const second = await fetch(`${lb.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${ONE}`, 'content-type': 'application/json' }, body: chat })
  assert.equal(second.status, 429)
  assert.match(((await second.json()) as { error: { message: string } }).error.message, /max_in_flight = 1 requests at once \(1 used\)/)
  close()
  fake.mode = 'ok'
  await waitFor(async () => (await postAlone(`${lb.url}/v1/chat/completions`, ONE, chat)) === 200 ? true : null, 'admitted again once the stream ended', 10_000, 100)
  // a request sent as the stream ends may find its slot still taken in the worker and freed by the time the
  // control plane, which refuses, decides: admitted there, as it should be; none after this
  const byControlPlane = await lbMetric(lb, 'lb_gen_relay_admissions_total{by="control_plane"}')
  assert.ok(byControlPlane <= 1, `${byControlPlane} admitted by the control plane`)

  const ask = (key: string): Promise<unknown> =>
    new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: key, maxRetries: 0 }).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] })
  for (let i = 0; i < 2; i++) await ask(FREE)
  await assert.rejects(ask(OTHER_MODEL), (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found')
  assert.equal(await lbMetric(lb, 'lb_gen_consumer_requests_total{consumer="free"}'), 2, 'charged to its consumer all the same')

  // without a key: the source address is the consumer, its record in the shared table of consumers without a key
  await withinOneMinute(async () => {
    const statuses = await Promise.all(Array.from({ length: 20 }, () => postAlone(`${lb.url}/v1/chat/completions`, '', chat)))
    assert.equal(statuses.filter((s) => s === 200).length, ANON_RPM, `statuses: ${statuses.join(' ')}`)
  })
  assert.equal(await lbMetric(lb, 'lb_gen_consumer_rejections_total{consumer="other",reason="rpm"}'), 20 - ANON_RPM)
  assert.equal(await lbMetric(lb, 'lb_gen_relay_admissions_total{by="control_plane"}'), byControlPlane)
})

test('every way a worker-admitted request ends gives its count back: a server dying mid-stream, refusing, a client leaving', async (t) => {
  const { a, b, lb } = await twoServers(t)
  // one stream held at one server (x): while the other (y) has none in flight, every request goes to y
  const hold = await openStream(lb.url, 'none')
  const [x, y] = a.bodies.length === 1 ? [a, b] : [b, a]
  const ended = (outcome: string): Promise<number> => lbMetric(lb, `lb_gen_requests_total{endpoint="chat",outcome="${outcome}"}`).catch(() => 0)
  const ask = (): Promise<Response> => fetch(`${lb.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }] }),
  })
  const ways: Array<{ what: string, mode: Mode, outcome: string, end: () => Promise<void> }> = [
    { what: 'dying mid-stream', mode: 'die', outcome: 'error', end: async () => { await openStream(lb.url, 'none'); y.events.emit('go') } },
    { what: 'refused (400)', mode: 'fail400', outcome: 'client_error', end: async () => assert.equal((await ask()).status, 400) },
    { what: 'the client leaving mid-stream', mode: 'hang', outcome: 'cancelled', end: async () => (await openStream(lb.url, 'none'))() },
  ]
  // each way three times: one count left behind makes the second a tie and the third go to x
  for (const { what, mode, outcome, end } of ways) {
    y.mode = mode
    for (let k = 1; k <= 3; k++) {
      const atX = x.bodies.length
      const atY = y.bodies.length
      const before = await ended(outcome)
      await end()
      await waitFor(async () => await ended(outcome) > before ? true : null, `${what} #${k} counted`)
      assert.equal(x.bodies.length, atX, `${what} #${k}: went to the server with one in flight, so y's count was not given back`)
      assert.equal(y.bodies.length, atY + 1, `${what} #${k}`)
    }
  }
  hold()
})
