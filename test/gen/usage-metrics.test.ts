// Usage you can see (#36 point 4): through a real lb with a local model
// ("stories") and a remote server (another generation service, "far", serving
// "beta"), requests in both APIs with the official clients, then /metrics has
// per-model and per-server requests, tokens, TTFT and TPOT samples and in
// flight back to 0 (counts, never timings; a 429 over a key's budget is no
// request a model took and leaves nothing in flight), a model name a client invents is
// no label, and promtool accepts the text; the dashboard's /api/lb/generation
// shows the servers, their models and the key's budget use; the runtime
// socket's `show models` has one line per (server, model) and `help` lists it.

import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { test } from 'node:test'
import { Ollama } from 'ollama'
import OpenAI from 'openai'
import { tokenHash } from '../../core/auth/token-digest.js'
import { requireTool, sock, startAdminLb } from '../admin/util.js'
import { connect, startChromium, stopChromium } from '../chromium.js'
import { simpleConfig, sleep, startLb } from '../helpers.js'
import { gatewayConfig, RANDOM, startGen, STORIES, until, withinOneMinute } from './helpers.js'

const KEY = 'lb-usage-metrics-0123456789abcdef'
const TIGHT = 'lb-usage-tight-0123456789abcdefgh'

/** The value of the sample `name{labels}` (labels in the order lb writes them), or null. */
function sample (text: string, name: string, labels: string): number | null {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `))
  return line === undefined ? null : Number(line.slice(line.lastIndexOf(' ') + 1))
}

test('per-model and per-server usage on /metrics, the dashboard and `show models`', async (t) => {
  const promtool = requireTool(t, 'promtool', 'prometheus')
  const far = await startGen(t, { models: { beta: RANDOM }, builtin_model: false })
  const lb = await startLb(gatewayConfig({ stories: STORIES }, `
[[generation.servers]]
name = "far"
kind = "lb"
url = "${far.base}"
[[generation.keys]]
consumer = "team"
hash = "${tokenHash(KEY)}"
rpm = 1000
tpm = 1000000
[[generation.keys]]
consumer = "tight"
hash = "${tokenHash(TIGHT)}"
rpm = 1
[runtime_socket]
enabled = true
path = "lb.sock"
`).replace('metrics = true', 'metrics = true\napi = true\npage = true'))
  t.after(() => lb.stop())
  const dash = `http://127.0.0.1:${await lb.portOf('dashboard')}`
  const runtime = join(lb.dir, 'run', 'lb.sock')
  const openai = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: KEY, maxRetries: 0 })
  const ollama = new Ollama({ host: lb.url, headers: { authorization: `Bearer ${KEY}` } })
  await until(async () => (await ollama.list()).models.some((m) => m.name === 'beta:latest'), 20_000, 'the remote server listed')

  let streamedMulti = 0
  await withinOneMinute(async () => {
    // local, OpenAI API: streamed (TTFT at the first chunk) and not
    let completion = 0
    for await (const ch of await openai.chat.completions.create({ model: 'stories', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, seed: 1, stream: true, stream_options: { include_usage: true } })) {
      completion = ch.usage?.completion_tokens ?? completion
    }
    if (completion > 1) streamedMulti++
    const c = await openai.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 5, seed: 2 })
    assert.ok(c.usage!.completion_tokens > 0)
    // remote, Ollama API: not streamed and streamed
    const g = await ollama.generate({ model: 'beta', prompt: 'Once upon a time', options: { num_predict: 5, seed: 3 } })
    assert.ok(g.eval_count > 0)
    let evals = 0
    for await (const p of await ollama.chat({ model: 'beta', messages: [{ role: 'user', content: 'Hi' }], stream: true, options: { num_predict: 6, seed: 4 } })) {
      if (p.done) evals = p.eval_count
    }
    if (evals > 1) streamedMulti++
    // a name the client invents is a 404 in each shape, and no label
    await assert.rejects(openai.chat.completions.create({ model: 'invented-by-client', messages: [{ role: 'user', content: 'Hi' }] }), OpenAI.NotFoundError)
    await assert.rejects(ollama.generate({ model: 'invented-too', prompt: 'x' }), /not found/)
    // a request over its key's budget is no request the model took (nor one left in flight)
    const tight = new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: TIGHT, maxRetries: 0 })
    await tight.completions.create({ model: 'stories', prompt: 'Once', max_tokens: 3 })
    await assert.rejects(tight.completions.create({ model: 'stories', prompt: 'Once', max_tokens: 3 }), OpenAI.RateLimitError)

    // the dashboard's JSON: servers (local first), their models, loaded or not, in flight, and the key's budget this minute
    const view = await (await fetch(`${dash}/api/lb/generation`)).json() as any
    assert.equal(view.enabled, true)
    assert.deepEqual(view.servers.map((s: any) => [s.name, s.kind, s.up]), [['local', 'local', true], ['far', 'lb', true]])
    const local = view.servers[0].models.find((m: any) => m.model === 'stories:latest')
    assert.deepEqual([local.loaded, local.inFlight, local.requests], [true, 0, 3])
    assert.ok(local.inputTokens > 0 && local.outputTokens > 0)
    const remote = view.servers[1].models.find((m: any) => m.model === 'beta:latest')
    assert.deepEqual([remote.inFlight, remote.requests], [0, 2])
    assert.ok(remote.outputTokens > 0)
    assert.equal(view.servers[0].inFlight + view.servers[1].inFlight, 0)
    assert.equal(view.queueDepth, 0)
    assert.deepEqual(view.budgets.map((b: any) => [b.consumer, b.requests, b.inFlight, b.limits.rpm]), [['team', 4, 0, 1000], ['tight', 1, 0, 1]])
    assert.ok(view.budgets[0].minuteTokens > 0)
  })

  const text = await (await fetch(`${dash}/metrics`)).text()
  const l = (model: string, server: string): string => `gen_ai_request_model="${model}",server="${server}"`
  for (const [model, server, n] of [['stories:latest', 'local', 3], ['beta:latest', 'far', 2]] as const) {
    assert.equal(sample(text, 'lb_gen_model_requests_total', `${l(model, server)},outcome="ok"`), n, `${server} requests`)
    assert.ok(sample(text, 'lb_gen_model_tokens_total', `${l(model, server)},gen_ai_token_type="input"`)! > 0, `${server} prompt tokens`)
    assert.ok(sample(text, 'lb_gen_model_tokens_total', `${l(model, server)},gen_ai_token_type="output"`)! > 0, `${server} completion tokens`)
    assert.equal(sample(text, 'lb_gen_model_in_flight', l(model, server)), 0, `${server} in flight`)
    assert.equal(sample(text, 'gen_ai_server_time_to_first_token_seconds_count', l(model, server)), n, `${server} TTFT, one per request`)
    assert.equal(sample(text, 'gen_ai_server_time_to_first_token_seconds_bucket', `${l(model, server)},le="+Inf"`), n)
  }
  // TPOT: one per request with pieces and more than one completion token (at least the streamed ones)
  const tpot = (sample(text, 'gen_ai_server_time_per_output_token_seconds_count', l('stories:latest', 'local')) ?? 0) +
    (sample(text, 'gen_ai_server_time_per_output_token_seconds_count', l('beta:latest', 'far')) ?? 0)
  assert.ok(tpot >= streamedMulti && tpot <= 5, `TPOT samples: ${tpot}`)
  assert.doesNotMatch(text, /^lb_gen_model_requests_total\{[^}]*outcome="client_error"/m, 'the 429 is counted per consumer, not per model')
  assert.ok(streamedMulti > 0, 'a streamed reply had more than one token')
  assert.doesNotMatch(text, /invented/, 'a model name a client invents is no label')
  assert.doesNotMatch(text, new RegExp(KEY), 'never a key')
  assert.match(text, /^lb_gen_queue_depth 0$/m)
  assert.match(text, /^lb_gen_consumer_requests_total\{consumer="team"\} 4$/m)
  if (promtool !== null) assert.equal(execFileSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' }).trim(), '')

  // the runtime socket: one line per (server, model), HAProxy's "# fields" header first; `help` lists the command
  const shown = (await sock(runtime, 'show models')).trim().split('\n')
  assert.equal(shown[0], '# server model loaded in_flight requests input_tokens output_tokens server_up')
  const row = (server: string, model: string): string[] | undefined => shown.map((x) => x.split(' ')).find((f) => f[0] === server && f[1] === model)
  assert.deepEqual(row('local', 'stories:latest')?.slice(2, 5), ['yes', '0', '3'])
  assert.deepEqual(row('far', 'beta:latest')?.slice(3, 5), ['0', '2'])
  assert.equal(row('far', 'beta:latest')?.[7], '1')
  assert.equal(shown.length, 3, 'one line per (server, model) that a server has')
  assert.match(await sock(runtime, 'help'), /^ {2}show models +: report each model server's models/m)

  // the page's section, in headless Chromium when there is one (test/admin/dashboard-page.test.ts drives the rest)
  const bin = requireTool(t, 'chromium', 'chromium')
  if (bin === null) return
  const chrome = await startChromium(bin)
  t.after(() => stopChromium(chrome))
  const cdp = await connect(chrome.port, `${dash}/dashboard/`)
  t.after(() => cdp.close())
  const read = async (): Promise<any> => {
    const r = await cdp.call('Runtime.evaluate', {
      returnByValue: true,
      expression: `JSON.stringify({
        hidden: document.getElementById('generation').hidden,
        servers: [...document.querySelectorAll('#gen-models tr.gen-server')].map((tr) => ({ ...tr.dataset })),
        models: [...document.querySelectorAll('#gen-models tr.gen-model')].map((tr) => ({ ...tr.dataset })),
        budgets: [...document.querySelectorAll('#gen-budgets tr.gen-budget')].map((tr) => ({ ...tr.dataset })),
      })`,
    })
    const value = (r.result as { value?: string } | undefined)?.value
    return value === undefined ? null : JSON.parse(value) // undefined while the page is still loading
  }
  let seen = await read()
  for (const deadline = Date.now() + 20_000; Date.now() < deadline && (seen === null || seen.models.length < 2); seen = await read()) await sleep(200)
  assert.equal(seen.hidden, false, 'the section shows with a generation service')
  assert.deepEqual(seen.servers.map((s: any) => [s.server, s.up, s.inflight]), [['local', 'true', '0'], ['far', 'true', '0']])
  assert.deepEqual(seen.models.map((m: any) => [m.server, m.model, m.requests]), [['local', 'stories:latest', '3'], ['far', 'beta:latest', '2']])
  assert.equal(seen.models[0].loaded, 'true')
  assert.deepEqual(seen.budgets.map((b: any) => b.consumer), ['team', 'tight'])
})

test('without [generation]: /api/lb/generation says so and `show models` explains', async (t) => {
  const a = await startAdminLb(simpleConfig(['127.0.0.1:9']))
  t.after(() => a.lb.stop())
  assert.deepEqual(await (await fetch(`${a.dash}/api/lb/generation`)).json(), { enabled: false, servers: [], queueDepth: 0, budgets: [] })
  assert.match(await sock(a.sock, 'show models'), /^The generation service is not running/)
})
