// Fuzz campaign, surface 5: request bodies of the generation endpoint through
// lb (/api/generate, /api/chat as Ollama has them, /v1/chat/completions as
// OpenAI's): mutated fields of every type, broken JSON, deep nesting. Each
// gets a status under 500 within the time-out, lb and its runner stay up.
// Costly requests (huge num_predict, prompts of megabytes) run apart, after
// the others, one at a time, each bounded by the same time-out.
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import { test } from 'node:test'
import { startLb } from '../helpers.js'
import { LONG, LbWatch, type Verdict, caseCount, printable, report, runCases } from './lib/campaign.js'
import { bodyText, mutate } from './lib/json.js'
import type { Rng } from './lib/prng.js'
import { rawRequest, send } from './lib/raw-http.js'

const TIMEOUT = 8000

interface GenCase { family: string, bytes: Buffer }

const options = (rng: Rng): Record<string, unknown> => ({ num_predict: rng.range(1, 8), temperature: rng.pick([0, 0.5, 1]), seed: rng.int(100) })
const message = (rng: Rng): Record<string, unknown> => ({ role: rng.pick(['user', 'system', 'assistant', 'tool', 'x']), content: rng.word(30) })

function genCase (rng: Rng): GenCase {
  const which = rng.int(3)
  const model = rng.pick(['lb-tiny', 'lb-tiny:latest', 'nope', ''])
  const template = which === 0
    ? { model, prompt: rng.word(40), stream: rng.chance(0.5), options: options(rng), ...(rng.chance(0.2) ? { context: [rng.pick([1, 2, 999_999, 2 ** 31])] } : {}) }
    : which === 1
      ? { model, messages: Array.from({ length: rng.range(0, 3) }, () => message(rng)), stream: rng.chance(0.5), options: options(rng) }
      : { model, messages: [message(rng)], max_tokens: rng.range(1, 8), stream: rng.chance(0.5) }
  const value = mutate(rng, template)
  // a mutation may name a cost (num_predict, a long context): keep this family cheap, the costly one is apart
  if (typeof value === 'object' && value !== null && 'options' in value) (value as Record<string, unknown>).options = mutate(rng, options(rng))
  const opts = (value as { options?: Record<string, unknown> } | null)?.options
  if (typeof opts === 'object' && opts !== null && (typeof opts.num_predict !== 'number' || opts.num_predict < 0 || opts.num_predict > 16)) opts.num_predict = 8
  const path = ['/api/generate', '/api/chat', '/v1/chat/completions'][which]!
  return { family: ['generate-body', 'chat-body', 'openai-body'][which]!, bytes: rawRequest('POST', path, bodyText(rng, value)) }
}

function costCase (rng: Rng): GenCase {
  const big = 'w '.repeat(rng.pick([50_000, 500_000, 2_000_000]))
  const body = rng.chance(0.5)
    ? { model: 'lb-tiny', prompt: big, stream: false, options: { num_predict: 4 } }
    : { model: 'lb-tiny', prompt: 'hi', stream: false, options: { num_predict: rng.pick([100_000, 1e9]), num_ctx: rng.pick([2048, 1 << 20]) } }
  return { family: 'cost', bytes: rawRequest('POST', '/api/generate', JSON.stringify(body)) }
}

test('generation request bodies: a status under 500 for each within the time-out; lb and the runner stay up', async (t) => {
  const lb = await startLb(`[generation]
socket = "{{DIR}}/gen.sock"
ollama_models = "off"
restart_delay = "20ms"
request_timeout = "2s"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.api]
rule = "PathPrefix(\`/api/\`) || PathPrefix(\`/v1/\`)"
service = "gen"
[services.gen]
kind = "generate"
`)
  t.after(async () => { await lb.stop(); rmSync(lb.dir, { recursive: true, force: true }) })
  const watch = new LbWatch(lb)
  // the runner loads its model on the first request, which may take longer than request_timeout on a busy machine
  const cheap = rawRequest('POST', '/api/generate', '{"model":"lb-tiny","prompt":"hi","stream":false,"options":{"num_predict":1}}')
  let warm = await send(lb.port, cheap, 60_000)
  for (let i = 0; i < 20 && warm.statuses[0] !== 200; i++) warm = await send(lb.port, cheap, 60_000)
  assert.deepEqual(warm.statuses, [200], warm.head)

  const exec = async (c: GenCase): Promise<Verdict | null> => {
    const r = await send(lb.port, c.bytes, TIMEOUT)
    const body = r.head.slice(r.head.indexOf('\r\n\r\n') + 4, r.head.indexOf('\r\n\r\n') + 200)
    const got = r.statuses.length > 0 ? `status ${r.statuses[0]} after ${r.ms} ms (${JSON.stringify(body)})` : r.closed ? 'closed without a status line' : `nothing within ${TIMEOUT} ms`
    if (r.statuses.length === 0) return { check: 'unanswered', expected: `a status line within ${TIMEOUT} ms`, got }
    if (r.statuses[0]! >= 500) return { check: '5xx', expected: 'a status under 500 (a bad request names its field with 400)', got }
    return null
  }
  const common = { input: (c: GenCase) => printable(c.bytes, 300), family: (c: GenCase) => c.family, exec, watch: () => watch.check() }
  report(t, await runCases({ surface: 'gen', count: caseCount(300), concurrency: 4, generate: genCase, ...common }))
  // a costly request is refused before any model work (or stopped at request_timeout), and leaves the runner free
  const costly = async (c: GenCase): Promise<Verdict | null> => {
    const v = await exec(c)
    if (v !== null) return v
    const after = await send(lb.port, cheap, TIMEOUT)
    return after.statuses[0] === 200 ? null : { check: 'held', expected: 'a cheap request right after it answers 200', got: after.statuses.length > 0 ? `status ${after.statuses[0]}` : `nothing within ${TIMEOUT} ms` }
  }
  report(t, await runCases({ surface: 'gen-cost', count: LONG ? 30 : 3, concurrency: 1, generate: costCase, ...common, exec: costly }))
})
