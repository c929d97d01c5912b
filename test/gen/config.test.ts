// The [generation] table: defaults, precise problems, relative paths.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CLI, ROOT } from '../helpers.js'
import { Checker } from '../../core/config/check.js'
import { checkGeneration, parseKeepAlive } from '../../core/gen/config.js'
import { parseKeepAliveValue } from '../../core/gen/ollama/request.js'

test('defaults of an empty [generation] table', () => {
  const c = new Checker()
  const g = checkGeneration(c, { ollama_models: 'off' }, 'generation', '/etc/lb')
  assert.deepEqual(c.problems, [])
  assert.equal(g.enabled, true)
  assert.equal(g.socket, '/etc/lb/run/gen.sock')
  assert.equal(g.listen, '')
  assert.equal(g.threads, 1)
  assert.equal(g.parallel, 4)
  assert.equal(g.contexts, 2)
  assert.equal(g.maxQueue, 512)
  assert.equal(g.keepAliveMs, 300_000)
  assert.equal(g.requestTimeoutMs, 300_000)
  assert.equal(g.ollamaModels, '')
  assert.equal(g.builtinModel, true)
  assert.equal(g.streamBatchMs, 50)
  assert.equal(g.cancelGraceMs, 5_000)
  assert.equal(g.maxPromptBytes, 1 << 20)
  assert.equal(g.maxPromptTokens, 0)
  assert.equal(g.maxNumPredict, 0)
  assert.deepEqual(g.auth, { required: true, rpm: 0, tpm: 0, tpd: 0, maxInFlight: 0 }, 'keys required once there are any; no limits')
  assert.deepEqual(g.keys, [])
})

test('every problem is reported with its key path', () => {
  const c = new Checker()
  const g = checkGeneration(c, {
    listen: 'localhost', threads: 0, keep_alive: 'soon', request_timeout: 5, colour: 'red', models: { 'bad name': 'x.gguf', ok: 3 }, relay: 'thread',
  }, 'generation', '/etc/lb')
  assert.deepEqual(c.problems.sort(), [
    'generation.colour: unknown key (allowed: enabled, socket, listen, workers, threads, parallel, contexts, max_queue, request_timeout, keep_alive, num_ctx, max_loaded, models_dir, ollama_models, builtin_model, restart_delay, restart_delay_max, stream_batch, cancel_grace, max_prompt_bytes, max_prompt_tokens, max_num_predict, models, servers, aliases, fallbacks, relay, auth, keys)',
    'generation.keep_alive: expected a duration like "5m", "0" or "-1" (forever), found "soon"',
    'generation.listen: expected an address like "127.0.0.1:11434" (or "" for none), found "localhost"',
    'generation.models."bad name": expected a model name like "name" or "name:tag", found "bad name"',
    'generation.models.ok: expected a path to a .gguf file, found number 3',
    'generation.relay: expected one of "worker", "service", found "thread"',
    'generation.request_timeout: expected a duration like "5s" or "250ms" of at least 1ms, found number 5',
    'generation.threads: expected an integer from 1 to 256, found number 0',
  ])
  assert.equal(g.threads, 1, 'a bad value falls back to the default')
  assert.equal(g.relay, 'worker')
})

test('relative paths resolve against the config folder; model names are canonical', () => {
  const c = new Checker()
  const g = checkGeneration(c, { socket: '/run/x.sock', models_dir: 'models', ollama_models: 'store', models: { Stories: 'm/s.gguf', 'x:7b': '/abs.gguf' } }, 'generation', '/srv/lb')
  assert.deepEqual(c.problems, [])
  assert.equal(g.socket, '/run/x.sock')
  assert.equal(g.modelsDir, '/srv/lb/models')
  assert.equal(g.ollamaModels, '/srv/lb/store')
  assert.deepEqual(g.models, { 'stories:latest': '/srv/lb/m/s.gguf', 'x:7b': '/abs.gguf' })
})

test('OLLAMA_MODELS is honoured when ollama_models is not set', () => {
  const old = process.env.OLLAMA_MODELS
  process.env.OLLAMA_MODELS = '/data/ollama'
  try {
    const g = checkGeneration(new Checker(), {}, 'generation', '/')
    assert.equal(g.ollamaModels, '/data/ollama')
  } finally {
    if (old === undefined) delete process.env.OLLAMA_MODELS
    else process.env.OLLAMA_MODELS = old
  }
})

test('keep_alive values: config strings and request values', () => {
  assert.equal(parseKeepAlive('5m'), 300_000)
  assert.equal(parseKeepAlive('-1'), -1)
  assert.equal(parseKeepAlive('0'), 0)
  assert.equal(parseKeepAliveValue(30), 30_000)
  assert.equal(parseKeepAliveValue(-1), -1)
  assert.equal(parseKeepAliveValue('1h30m'), 5_400_000)
  assert.equal(parseKeepAliveValue('-1m'), -1)
  assert.equal(parseKeepAliveValue('-1'), -1)
  assert.ok(Number.isNaN(parseKeepAliveValue('soon')))
})

/** The config's reference to an environment variable, "${NAME}" (built: a literal would read as a mistaken template). */
const envRef = (name: string): string => '$' + `{${name}}`

test('[[generation.servers]], aliases, fallbacks: checked, each problem naming its key', () => {
  const c = new Checker()
  process.env.LB_TEST_GEN_KEY = 'sk-from-env'
  const g = checkGeneration(c, {
    ollama_models: 'off',
    servers: [
      { name: 'gpu1', kind: 'ollama', url: 'http://10.0.0.5:11434/' },
      { name: 'vllm', kind: 'openai', url: 'https://10.0.0.6:8000/v1', api_key: envRef('LB_TEST_GEN_KEY'), refresh: '30s' },
    ],
    aliases: { 'GPT-4o-mini': 'qwen2.5:7b' },
    fallbacks: { 'qwen2.5:7b': ['llama3.2:3b'] },
  }, 'generation', '/')
  delete process.env.LB_TEST_GEN_KEY
  assert.deepEqual(c.problems, [])
  assert.deepEqual(g.servers, [
    { name: 'gpu1', kind: 'ollama', url: 'http://10.0.0.5:11434', apiKey: '', refreshMs: 10_000 },
    { name: 'vllm', kind: 'openai', url: 'https://10.0.0.6:8000', apiKey: 'sk-from-env', refreshMs: 30_000 },
  ])
  assert.deepEqual(g.aliases, { 'gpt-4o-mini:latest': 'qwen2.5:7b' })
  assert.deepEqual(g.fallbacks, { 'qwen2.5:7b': ['llama3.2:3b'] })

  const bad = new Checker()
  checkGeneration(bad, {
    ollama_models: 'off',
    servers: [
      { name: 'gpu1', kind: 'tgi', url: 'http://a:1' },
      { name: 'gpu1', kind: 'ollama', url: 'ftp://a' },
      { kind: 'openai', url: 'not a url', api_key: envRef('LB_TEST_UNSET_KEY'), port: 3 },
      { name: 'crlf', kind: 'openai', url: 'http://a:1', api_key: 'sk-1\r\nx-injected: 1' },
    ],
    aliases: { 'a b': 'x', ok: 3 },
    fallbacks: { x: [] },
  }, 'generation', '/')
  assert.deepEqual(bad.problems.sort(), [
    'generation.aliases."a b": expected a model name like "name" or "name:tag", found "a b"',
    'generation.aliases.ok: expected a model name like "qwen2.5:7b", found number 3',
    'generation.fallbacks.x: expected a non-empty array of model names, found an array of 0',
    'generation.servers[0].kind: expected one of "ollama", "openai", "lb", found "tgi"',
    'generation.servers[1].name: expected a name no other server has, found "gpu1"',
    'generation.servers[1].url: expected an http:// or https:// URL with a host, like "http://10.0.0.5:11434", found "ftp://a"',
    'generation.servers[2].api_key: expected environment variable LB_TEST_UNSET_KEY to be set, found it unset or empty',
    'generation.servers[2].name: expected a string (required), found nothing',
    'generation.servers[2].port: unknown key (allowed: name, kind, url, api_key, refresh)',
    'generation.servers[2].url: expected an http:// or https:// URL with a host, like "http://10.0.0.5:11434", found "not a url"',
    'generation.servers[3].api_key: expected visible ASCII characters (it is sent as a bearer token), found a space, a control or a non-ASCII character',
  ])
})

test('lb check names the key of a bad remote server', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lb-gen-check-'))
  try {
    const file = join(dir, 'lb.toml')
    writeFileSync(file, `[entrypoints.web]
address = "127.0.0.1:1"
[generation]
socket = "gen.sock"
ollama_models = "off"
[[generation.servers]]
name = "gpu1"
kind = "vllm"
url = "http://10.0.0.5:8000"
[[generation.servers]]
name = "gpu1"
kind = "ollama"
url = "10.0.0.6:11434"
`)
    const r = spawnSync(process.execPath, [CLI, 'check', '-c', file], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 })
    const out = r.stdout + r.stderr
    assert.equal(r.status, 1, out)
    assert.ok(out.includes('generation.servers[0].kind: expected one of "ollama", "openai", "lb", found "vllm"'), out)
    assert.ok(out.includes('generation.servers[1].name: expected a name no other server has, found "gpu1"'), out)
    assert.ok(out.includes('generation.servers[1].url: expected an http:// or https:// URL with a host'), out)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
