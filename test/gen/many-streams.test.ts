// 1,000 streams at once through lb (lb run, two workers) to a remote model
// server: every one answered whole. The data plane's workers all open their
// connections to the generation service's unix socket at the same moment, and a
// unix socket refuses a connect at once (EAGAIN) when its accept queue is full:
// with Node's default backlog (511) about a fifth of them got 502 "cannot
// connect to upstream server" (core/gen/http/socket.ts).
import { strict as assert } from 'node:assert'
import { test } from 'node:test'
import { Agent, request } from 'undici'
import { startLb } from '../helpers.js'
import { startFakeOpenAi } from './fake-openai.js'

test('1,000 concurrent streamed requests through lb to a remote server: all 200 and complete', { timeout: 120_000 }, async (t) => {
  const fake = await startFakeOpenAi(t, ['remote-model'])
  const lb = await startLb(`
[global]
workers = 2
access_log = "off"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[generation]
socket = "{{DIR}}/gen.sock"
ollama_models = "off"
builtin_model = false
[[generation.servers]]
name = "fake"
kind = "openai"
url = "${fake.url}/v1"
[routers.gen]
rule = "PathPrefix(\`/v1/\`)"
service = "gen"
[services.gen]
kind = "generate"
`)
  t.after(() => lb.stop())
  const agent = new Agent({ connections: 1100 })
  t.after(() => agent.close())
  const outcomes: Record<string, number> = {}
  await Promise.all(Array.from({ length: 1000 }, async () => {
    const res = await request(`${lb.url}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'remote-model', stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
    })
    const text = await res.body.text()
    const k = res.statusCode === 200 && text.includes('data: [DONE]') ? 'complete' : `${res.statusCode} ${text.slice(0, 100)}`
    outcomes[k] = (outcomes[k] ?? 0) + 1
  }))
  assert.deepEqual(outcomes, { complete: 1000 })
})
