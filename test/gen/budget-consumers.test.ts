// Consumers without a key (#36 point 3): with [generation.auth] required =
// false, a request without a key is charged to the user lb's basicAuth
// authenticated (the data plane tells the generation service in x-lb-user),
// else to its source address (x-real-ip, set by lb), each with the limits of
// [generation.auth]. A client cannot pick its consumer: the x-lb-user and
// x-real-ip it sends never reach the service, and the service's own TCP
// listener, which lb does not front, trusts neither.

import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import bcrypt from 'bcryptjs'
import { Ollama } from 'ollama'
import OpenAI from 'openai'
import { tokenHash } from '../../core/auth/token-digest.js'
import { type Lb, request, startLb } from '../helpers.js'
import { gatewayConfig, roomInMinute, STORIES } from './helpers.js'

const KEY = 'lb-team-key-0123456789abcdefghij'

const config = gatewayConfig({ stories: STORIES }, `
[generation.auth]
required = false
rpm = 1
[[generation.keys]]
consumer = "team"
hash = "${tokenHash(KEY)}"

[entrypoints.auth]
address = "127.0.0.1:0"
[routers.gen-auth]
rule = "PathPrefix(\`/\`)"
entrypoints = ["auth"]
service = "gen"
middlewares = ["users"]
[middlewares.users]
type = "basicAuth"
users = ["ann:${bcrypt.hashSync('pw-ann', 4)}", "bob:${bcrypt.hashSync('pw-bob', 4)}"]
`, 'listen = "127.0.0.1:0"')

const BODY = '{"model":"stories","prompt":"Hi","stream":false,"options":{"num_predict":1}}'
const basic = (user: string): string => 'Basic ' + Buffer.from(`${user}:pw-${user}`).toString('base64')

describe('consumers without a key (required = false)', () => {
  let lb: Lb
  let authUrl: string
  before(async () => {
    lb = await startLb(config)
    authUrl = `http://127.0.0.1:${await lb.portOf('auth')}`
    await roomInMinute() // the four tests count in one window
  })
  after(() => lb.stop())

  test('the source address is the consumer: its second request of the minute is 429, whatever x-lb-user or x-real-ip it sends', async () => {
    const ollama = new Ollama({ host: lb.url })
    const r = await ollama.generate({ model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 1 } })
    assert.equal(r.eval_count, 1)
    for (const headers of [{}, { 'x-lb-user': 'carol' }, { 'x-real-ip': '10.9.8.7' }, { x_lb_user: 'dave' }]) {
      const again = await request(`${lb.url}/api/generate`, { method: 'POST', headers, body: BODY })
      assert.equal(again.status, 429, `with ${JSON.stringify(headers)}`)
      assert.match(JSON.parse(again.body).error, /^consumer addr:127\.0\.0\.1 is over its limit of rpm = 1/)
    }
    // a key is its own consumer (no limits here), and a wrong one is refused even though keys are optional
    const team = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: KEY, maxRetries: 0 })
    assert.equal((await team.completions.create({ model: 'stories', prompt: 'Hi', max_tokens: 1 })).usage!.completion_tokens, 1)
    const wrong = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: 'lb-wrong-0123456789abcdefghijk', maxRetries: 0 })
    await assert.rejects(wrong.completions.create({ model: 'stories', prompt: 'Hi', max_tokens: 1 }), OpenAI.AuthenticationError)
  })

  test('the user basicAuth authenticated is the consumer: one per user, not per address; a client cannot claim another user', async () => {
    const ann = await request(`${authUrl}/api/generate`, { method: 'POST', headers: { authorization: basic('ann') }, body: BODY })
    assert.equal(ann.status, 200, 'ann is not the exhausted address consumer')
    const annAgain = await request(`${authUrl}/api/generate`, { method: 'POST', headers: { authorization: basic('ann'), 'x-lb-user': 'bob' }, body: BODY })
    assert.equal(annAgain.status, 429)
    assert.match(JSON.parse(annAgain.body).error, /^consumer user:ann is over its limit/)
    const bob = await request(`${authUrl}/api/generate`, { method: 'POST', headers: { authorization: basic('bob') }, body: BODY })
    assert.equal(bob.status, 200)
  })

  test('the service\'s own TCP listener trusts no forwarding header: the peer address is the consumer', async () => {
    const direct = `http://127.0.0.1:${await lb.portOf('generation')}`
    const r = await request(`${direct}/api/generate`, { method: 'POST', headers: { 'x-lb-user': 'erin', 'x-real-ip': '10.0.0.1' }, body: BODY })
    assert.equal(r.status, 429)
    assert.match(JSON.parse(r.body).error, /^consumer addr:127\.0\.0\.1 is over/)
  })

  test('metrics count them all under the one label "other"', async () => {
    const metrics = (await request(`http://127.0.0.1:${await lb.portOf('dashboard')}/metrics`)).body
    assert.match(metrics, /^lb_gen_consumer_requests_total\{consumer="other"\} 3$/m)
    assert.match(metrics, /^lb_gen_consumer_requests_total\{consumer="team"\} 1$/m)
    assert.match(metrics, /^lb_gen_consumer_rejections_total\{consumer="other",reason="rpm"\} 6$/m)
    assert.doesNotMatch(metrics, /ann|bob|127\.0\.0\.1"/, 'no user or address label')
  })
})
