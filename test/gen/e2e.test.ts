// Through the real balancer (`lb run -c FILE`): the generation service is the
// api backend of the web entry point, routed like any service. A model that
// aborts its runner process must not stop web traffic, and the runner comes
// back.
// 1. The service started here, reached by the balancer as a plain upstream at
//    "unix:<socket>" (which is all the data plane needs to know about it).
// 2. The balancer starting it itself from [generation] with a
//    `kind = "generate"` service.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { request as undiciRequest } from 'undici'
import { Ollama } from 'ollama'
import { request, startBackend, startLb, waitFor } from '../helpers.js'
import { HOSTILE, lines, startGen, STORIES } from './helpers.js'

const GENERATION = `
[generation]
socket = "{{DIR}}/gen.sock"
ollama_models = "off"
restart_delay = "20ms"

[generation.models]
stories = "${STORIES}"
hostile = "${HOSTILE}"
`

/** The web entry point: /api/ to the service "gen" defined by `gen` (no such route when null), the rest to `web`. */
const routes = (web: string, gen: string | null): string => `
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
${gen === null
? ''
: `
[routers.api]
rule = "PathPrefix(\`/api/\`)"
service = "gen"

${gen}
`}
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"

[[services.web.servers]]
name = "w1"
address = "${web}"
check = false
`

const CONFIG = (web: string): string => GENERATION + routes(web, '[services.gen]\nkind = "generate"')
const UPSTREAM_CONFIG = (web: string, socket: string): string =>
  routes(web, `[[services.gen.servers]]\nname = "gen"\naddress = "unix:${socket}"\ncheck = false`)

test('through the balancer, the service as a unix-socket upstream', async (t) => {
  const web = await startBackend('web')
  t.after(() => web.close())
  const { svc } = await startGen(t, { listen: '' })
  const lb = await startLb(UPSTREAM_CONFIG(web.address, svc.socketPath))
  t.after(() => lb.stop())
  await scenario(lb.url)
  assert.equal(svc.stats().runnerRestarts, 1)

  // A client that goes away stops its generation: the balancer drops the upstream connection, the service cancels.
  const ac = new AbortController()
  const r = await undiciRequest(`${lb.url}/api/generate`, {
    method: 'POST', signal: ac.signal, body: JSON.stringify({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 1900 } }),
  })
  await r.body[Symbol.asyncIterator]().next() // the first chunk: generation has begun
  ac.abort()
  await waitFor(() => svc.stats().requests.generate.cancelled === 1 && svc.stats().inFlight === 0,
    'the generation of a client that disconnected to be cancelled', 5000)
})

test('lb run with [generation] and a kind = "generate" service', async (t) => {
  const web = await startBackend('web')
  t.after(() => web.close())
  const lb = await startLb(CONFIG(web.address))
  t.after(() => lb.stop())
  await scenario(lb.url)
})

async function scenario (url: string): Promise<void> {
  const lb = { url }

  const gen = async (body: unknown): Promise<{ status: number, text: string }> => {
    const r = await request(`${lb.url}/api/generate`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } })
    return { status: r.status, text: r.body }
  }
  // The runner starts in the background: the first request waits in the queue for it.
  const first = await gen({ model: 'stories', prompt: 'Once upon a time', stream: false, options: { num_predict: 10 } })
  assert.equal(first.status, 200, first.text)
  assert.equal(JSON.parse(first.text).eval_count, 10)
  const streamed = await gen({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 10 } })
  assert.equal(lines(streamed.text).pop().done, true)
  assert.equal((await request(`${lb.url}/`)).body, 'web\n')

  // The official client through the balancer.
  const ollama = new Ollama({ host: lb.url })
  assert.ok((await ollama.list()).models.some((m) => m.name === 'stories:latest'))

  // Web traffic flows continuously while the runner crashes and restarts.
  let webOk = 0
  let webBad = 0
  let stop = false
  const traffic = (async () => {
    while (!stop) {
      const r = await request(`${lb.url}/page`).catch(() => null)
      if (r?.status === 200 && r.body === 'web\n') webOk++
      else webBad++
    }
  })()
  try {
    const inflight = undiciRequest(`${lb.url}/api/generate`, { method: 'POST', body: JSON.stringify({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 1900 } }) })
    const crash = await gen({ model: 'hostile', prompt: '{', stream: false })
    assert.equal(crash.status, 500)
    assert.match(JSON.parse(crash.text).error, /crashed/)
    const inflightText = await (await inflight).body.text()
    const lastLine = lines(inflightText).pop()
    assert.ok(lastLine.error !== undefined || lastLine.done === true, 'the in-flight stream ended cleanly (error line, or it had finished)')
    let after = await gen({ model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 4 } })
    for (let i = 0; i < 100 && after.status !== 200; i++) after = await gen({ model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 4 } })
    assert.equal(after.status, 200, 'the restarted runner serves again')
  } finally {
    stop = true // also when a step fails: a loop left running keeps the file from ending
    await traffic
  }
  assert.ok(webOk > 10, `web requests answered during the crash: ${webOk}`)
  assert.equal(webBad, 0, 'no web request failed')
}

test('a reload that adds the first kind = "generate" service starts the endpoint', async (t) => {
  const web = await startBackend('web')
  t.after(() => web.close())
  const withoutGen = GENERATION + routes(web.address, null)
  assert.doesNotMatch(withoutGen, /generate/)
  const lb = await startLb(withoutGen)
  t.after(() => lb.stop())
  const body = JSON.stringify({ model: 'stories', prompt: 'Once upon a time', stream: false, options: { num_predict: 5 } })
  assert.equal((await request(`${lb.url}/api/generate`, { method: 'POST', body })).body, 'web\n', 'before: /api/ goes to the web backend')
  lb.write(CONFIG(web.address))
  lb.reload()
  await lb.logMatching(/"generation":2/, 5000)
  // the runner warms up in the background: the first request waits in the queue for it
  const r = await request(`${lb.url}/api/generate`, { method: 'POST', body })
  assert.equal(r.status, 200, r.body)
  assert.equal(JSON.parse(r.body).eval_count, 5)
})
