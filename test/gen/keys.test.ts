// API keys of the generation service (#36 point 3), through the real balancer
// (two data-plane workers, the generation service on its unix socket) with the
// official `openai` and `ollama` clients: no key and a wrong key get 401 in
// each API's shape, a key's model allow-list hides the other models (404 and
// filtered lists), the keys never reach the log or /metrics (only consumer
// names do), and a bad key in the config is named by `lb check`.

import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { Ollama } from 'ollama'
import OpenAI from 'openai'
import { tokenHash } from '../../core/auth/token-digest.js'
import { CLI, type Lb, request, startLb, tempDir } from '../helpers.js'
import { gatewayConfig, RANDOM, STORIES } from './helpers.js'

const FULL = 'lb-full-0123456789abcdefghijkl'
const STORIES_ONLY = 'lb-stories-0123456789abcdefghij'
const KEYS = [FULL, STORIES_ONLY]

const config = gatewayConfig({ stories: STORIES, random: RANDOM }, `
[[generation.keys]]
consumer = "full"
hash = "${tokenHash(FULL)}"
[[generation.keys]]
consumer = "stories-only"
hash = ["${tokenHash('lb-retired-key-0123456789abcdef')}", "${tokenHash(STORIES_ONLY)}"]
models = ["stor*"]
`)

/** The client with `key`, or sending no Authorization at all ('': the client insists on a key, so it is removed). */
const openai = (lb: Lb, key: string): OpenAI =>
  new OpenAI({ baseURL: `${lb.url}/v1`, apiKey: key === '' ? 'unused' : key, maxRetries: 0, defaultHeaders: key === '' ? { Authorization: null } : {} })
const ollama = (lb: Lb, key: string | null): Ollama => new Ollama({ host: lb.url, headers: key === null ? {} : { Authorization: `Bearer ${key}` } })
const msg = [{ role: 'user' as const, content: 'Hello' }]

/** The status and error message of a rejected call of the ollama client. */
async function ollamaError (p: Promise<unknown>): Promise<{ status: number, error: string }> {
  try {
    await p
  } catch (e) {
    const r = e as { status_code: number, error: string }
    return { status: r.status_code, error: r.error }
  }
  throw new Error('the call succeeded')
}

describe('generation keys through lb', () => {
  let lb: Lb
  before(async () => { lb = await startLb(config) })
  after(() => lb.stop())

  test('no key and a wrong key: 401 in OpenAI\'s shape (AuthenticationError, invalid_api_key) and Ollama\'s', async () => {
    for (const key of ['', 'lb-wrong-0123456789abcdefghijk']) {
      await assert.rejects(openai(lb, key).chat.completions.create({ model: 'stories', messages: msg, max_tokens: 2 }),
        (e: unknown) => e instanceof OpenAI.AuthenticationError && e.code === 'invalid_api_key' && e.type === 'authentication_error' &&
          (key === '' ? /no API key provided/ : /incorrect API key provided/).test(e.message) && /Authorization: Bearer KEY/.test(e.message))
      await assert.rejects(openai(lb, key).models.list(), OpenAI.AuthenticationError)
      const o = await ollamaError(ollama(lb, key === '' ? null : key).generate({ model: 'stories', prompt: 'Hi', stream: false }))
      assert.equal(o.status, 401)
      assert.match(o.error, key === '' ? /^no API key provided/ : /^incorrect API key provided/)
      assert.equal((await ollamaError(ollama(lb, key === '' ? null : key).list())).status, 401)
    }
    // raw: OpenAI's whole body, and the liveness routes that need no key
    const raw = await request(`${lb.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"stories","input":"x"}' })
    assert.equal(raw.status, 401)
    assert.deepEqual(JSON.parse(raw.body), { error: { message: JSON.parse(raw.body).error.message, type: 'authentication_error', param: null, code: 'invalid_api_key' } })
    assert.equal((await request(`${lb.url}/api/version`)).status, 200)
    assert.equal((await request(`${lb.url}/health`)).status, 200)
  })

  test('a valid key: both clients work; an old key of the same consumer too', async () => {
    const r = await openai(lb, FULL).chat.completions.create({ model: 'random', messages: msg, max_tokens: 3 })
    assert.equal(r.usage!.completion_tokens, 3)
    assert.deepEqual((await ollama(lb, FULL).list()).models.map((m) => m.name).sort(), ['random:latest', 'stories:latest'])
    const g = await ollama(lb, 'lb-retired-key-0123456789abcdef').generate({ model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 2 } })
    assert.equal(g.eval_count, 2)
  })

  test('a key with a model allow-list: other models are 404 (as absent ones) and left out of every list', async () => {
    const client = openai(lb, STORIES_ONLY)
    const ids: string[] = []
    for await (const m of client.models.list()) ids.push(m.id)
    assert.deepEqual(ids, ['stories:latest'])
    assert.equal((await client.models.retrieve('stories')).id, 'stories:latest')
    await assert.rejects(client.models.retrieve('random'), OpenAI.NotFoundError)
    await assert.rejects(client.chat.completions.create({ model: 'random', messages: msg, max_tokens: 2 }),
      (e: unknown) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found' && /model 'random' not found/.test(e.message))
    await assert.rejects(client.embeddings.create({ model: 'random', input: 'x' }), OpenAI.NotFoundError)
    const ok = await client.chat.completions.create({ model: 'stories', messages: msg, max_tokens: 2 })
    assert.equal(ok.usage!.completion_tokens, 2)

    const o = ollama(lb, STORIES_ONLY)
    assert.deepEqual((await o.list()).models.map((m) => m.name), ['stories:latest'])
    assert.equal((await ollamaError(o.generate({ model: 'random', prompt: 'Hi', stream: false }))).status, 404)
    assert.equal((await ollamaError(o.chat({ model: 'random', messages: msg, stream: false }))).status, 404)
    assert.equal((await ollamaError(o.show({ model: 'random' }))).status, 404)
    assert.equal((await ollamaError(o.embed({ model: 'random', input: 'x' }))).status, 404)
    assert.ok((await o.ps()).models.every((m) => m.name.startsWith('stories')), '/api/ps shows only allowed models')
  })

  test('keys never reach the log or /metrics; consumers do', async () => {
    const metrics = (await request(`http://127.0.0.1:${await lb.portOf('dashboard')}/metrics`)).body
    assert.match(metrics, /^lb_gen_consumer_requests_total\{consumer="full"\} [1-9]/m)
    assert.match(metrics, /^lb_gen_consumer_rejections_total\{consumer="stories-only",reason="model"\} [1-9]/m)
    assert.match(metrics, /^lb_gen_consumer_rejections_total\{consumer="other",reason="unauthorized"\} [1-9]/m)
    assert.match(metrics, /^gen_ai_client_token_usage_sum\{consumer="full",gen_ai_token_type="output"\} [1-9]/m)
    const out = lb.log() + lb.stdout() + metrics
    for (const k of [...KEYS, 'lb-wrong-0123456789abcdefghijk']) assert.ok(!out.includes(k), 'a key in the output')
    for (const k of KEYS) assert.ok(!out.includes(tokenHash(k).slice(7)), 'a key hash in the output')
  })
})

test('lb check names the [[generation.keys]] entry that is wrong, never echoing what its hash holds', () => {
  const dir = tempDir()
  const file = join(dir, 'lb.toml')
  const secret = 'sk-pasted-in-clear-0123456789'
  writeFileSync(file, `[entrypoints.web]
address = "127.0.0.1:0"
[generation]
socket = "${dir}/gen.sock"
[[generation.keys]]
consumer = "ok"
hash = "${tokenHash(FULL)}"
[[generation.keys]]
consumer = "team-b"
hash = "${secret}"
rpm = -1
[[generation.keys]]
consumer = "other"
hash = "${tokenHash(FULL)}"
`)
  const r = spawnSync(process.execPath, [CLI, 'check', '-c', file], { encoding: 'utf8' })
  assert.equal(r.status, 1)
  assert.match(r.stderr, /generation\.keys\[1\]\.hash: expected "sha256:<64 hex digits>" \(lb hash-token KEY\) \(consumer "team-b"\), found a string of 29 characters/)
  assert.match(r.stderr, /generation\.keys\[1\]\.rpm: expected an integer from 0/)
  assert.match(r.stderr, /generation\.keys\[2\]\.consumer: expected a name of letters.*not "other"/)
  assert.match(r.stderr, /generation\.keys\[2\]\.hash: the same hash is configured for another key/)
  assert.ok(!r.stderr.includes(secret), 'the pasted key is not echoed')
})

test('lb hash-token prints a new random key and its hash; with - it hashes the key read from stdin', () => {
  const made = spawnSync(process.execPath, [CLI, 'hash-token'], { encoding: 'utf8' })
  assert.equal(made.status, 0, made.stderr)
  const m = /^key: {2}(lb-[A-Za-z0-9_-]{43})\nhash: (sha256:[0-9a-f]{64})\n$/.exec(made.stdout)
  assert.ok(m !== null, made.stdout)
  assert.equal(m[2], tokenHash(m[1]!))
  assert.notEqual(spawnSync(process.execPath, [CLI, 'hash-token'], { encoding: 'utf8' }).stdout, made.stdout, 'a new key each time')
  const piped = spawnSync(process.execPath, [CLI, 'hash-token', '-'], { input: `${FULL}\n`, encoding: 'utf8' })
  assert.equal(piped.stdout, `${tokenHash(FULL)}\n`)
  const short = spawnSync(process.execPath, [CLI, 'hash-token', '-'], { input: 'short\n', encoding: 'utf8' })
  assert.equal(short.status, 2)
  assert.match(short.stderr, /at least 16 characters/)
})
