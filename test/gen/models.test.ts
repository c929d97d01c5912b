// Model names and where models come from: config, a models folder, an Ollama
// store (manifests pointing at GGUF blobs, with their system prompt and
// default options), the built-in tiny model; and the GGUF header reader.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseModelName } from '../../core/gen/models/names.js'
import { contextLength, humanCount, quantizationLevel, readGgufInfo } from '../../core/gen/models/gguf.js'
import { llamaGgufBytes } from '../../core/gen/models/llama-gguf.js'
import { tinyModelBytes } from '../../core/gen/models/tiny-model.js'
import { get, HOSTILE, post, RANDOM, startGen, STORIES, tempDir } from './helpers.js'

test('model names are canonicalised as Ollama does', () => {
  const cases: Array<[string, string | null]> = [
    ['llama3.2', 'llama3.2:latest'],
    ['Llama3.2:Latest', 'llama3.2:latest'],
    ['registry.ollama.ai/library/qwen:7b', 'qwen:7b'],
    ['registry.ollama.ai/someone/model:v1', 'someone/model:v1'],
    ['localhost:5000/ns/model', 'localhost:5000/ns/model:latest'],
    ['a/b/c/d', null],
    ['bad name', null],
    ['x:', null],
    ['', null],
  ]
  for (const [raw, want] of cases) assert.equal(parseModelName(raw), want, raw)
})

test('the GGUF header reader', async () => {
  const s = await readGgufInfo(STORIES)
  assert.equal(s.metadata.get('general.architecture'), 'llama')
  assert.equal(contextLength(s), 2048)
  assert.ok(s.parameterCount > 250_000 && s.parameterCount < 300_000)
  assert.equal(quantizationLevel(await readGgufInfo(HOSTILE)), 'Q8_0')
  assert.equal(humanCount(7_615_616_512), '7.6B')
  assert.equal(humanCount(135_000_000), '135M')
  await assert.rejects(readGgufInfo(new URL(import.meta.url).pathname), /not a GGUF file|truncated/)
})

test('the built-in tiny model is byte-for-byte deterministic and a valid GGUF', async (t) => {
  const a = tinyModelBytes()
  assert.ok(a.equals(tinyModelBytes()))
  assert.ok(a.length < 64 * 1024)
  const dir = await tempDir(t)
  await writeFile(join(dir, 't.gguf'), a)
  const info = await readGgufInfo(join(dir, 't.gguf'))
  assert.equal(info.metadata.get('general.architecture'), 'llama')
  assert.equal(info.metadata.get('tokenizer.ggml.model'), 'llama')
  assert.equal(info.tensorCount, 12)
})

test('the GGUF writer makes larger f16 models (the benchmark model) from dimensions alone', async (t) => {
  const dims = { name: 'x', embd: 64, ff: 128, heads: 4, blocks: 3, ctx: 512, type: 'f16', eosFreq: 0.001 } as const
  const a = llamaGgufBytes(dims)
  assert.ok(a.equals(llamaGgufBytes(dims)))
  const dir = await tempDir(t)
  await writeFile(join(dir, 'b.gguf'), a)
  const info = await readGgufInfo(join(dir, 'b.gguf'))
  assert.equal(info.metadata.get('llama.block_count'), 3)
  assert.equal(info.tensorCount, 3 + 9 * 3)
  assert.equal(info.mainTensorType, 1) // F16: the matrices; norm vectors stay F32
  assert.equal(quantizationLevel(info), 'F16')
})

/** An Ollama store as `ollama pull` leaves it: manifests/<host>/<ns>/<model>/<tag> and blobs/sha256-<hex>. */
async function makeStore (root: string): Promise<void> {
  const blob = async (data: Buffer | string, link?: string): Promise<{ digest: string, size: number }> => {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data
    const hex = createHash('sha256').update(bytes).digest('hex')
    const p = join(root, 'blobs', `sha256-${hex}`)
    if (link !== undefined) await symlink(link, p)
    else await writeFile(p, bytes)
    return { digest: `sha256:${hex}`, size: bytes.length }
  }
  await mkdir(join(root, 'blobs'), { recursive: true })
  const model = await blob(await readFile(STORIES), STORIES)
  const params = await blob(JSON.stringify({ temperature: 0, num_predict: 7, stop: ['.'] }))
  const system = await blob('You tell short stories.')
  const manifest = (layers: unknown[]): string => JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.v2+json', layers })
  const write = async (rel: string, body: string): Promise<void> => {
    await mkdir(join(root, 'manifests', rel, '..'), { recursive: true })
    await writeFile(join(root, 'manifests', rel), body)
  }
  await write('registry.ollama.ai/library/tinystories/latest', manifest([
    { mediaType: 'application/vnd.ollama.image.model', ...model },
    { mediaType: 'application/vnd.ollama.image.params', ...params },
    { mediaType: 'application/vnd.ollama.image.system', ...system },
  ]))
  await write('registry.ollama.ai/someone/thing/v1', manifest([{ mediaType: 'application/vnd.ollama.image.model', ...model }]))
  await write('registry.ollama.ai/library/broken/latest', '{not json')
}

test('models from a folder and from an Ollama store', async (t) => {
  const dir = await tempDir(t)
  const store = join(dir, 'store')
  await makeStore(store)
  const folder = join(dir, 'folder')
  await mkdir(folder)
  await symlink(RANDOM, join(folder, 'Random-Model.gguf'))
  await writeFile(join(folder, 'notes.txt'), 'not a model')
  const { base } = await startGen(t, { ollama_models: store, models_dir: folder, models: { stories: STORIES } })

  const names = (await get(base, '/api/tags')).json.models.map((m: any) => m.name).sort()
  assert.deepEqual(names, ['lb-tiny:latest', 'random-model:latest', 'someone/thing:v1', 'stories:latest', 'tinystories:latest'])

  // The store's params layer sets defaults (temperature 0, num_predict 7, stop "."); the request can override them.
  const r = await post(base, '/api/generate', { model: 'registry.ollama.ai/library/tinystories', prompt: 'Once upon a time', stream: false })
  assert.equal(r.status, 200)
  assert.ok(r.json.eval_count <= 7)
  assert.ok(!r.json.response.includes('.'))
  const longer = await post(base, '/api/generate', { model: 'tinystories', prompt: 'Once upon a time', stream: false, options: { num_predict: 20, stop: [] } })
  assert.equal(longer.json.eval_count, 20)

  const show = await post(base, '/api/show', { model: 'tinystories' })
  assert.equal(show.json.system, 'You tell short stories.')
  assert.match(show.json.parameters, /num_predict\s+7/)
  assert.equal((await post(base, '/api/generate', { model: 'someone/thing:v1', prompt: 'Hi', stream: false, options: { num_predict: 3 } })).status, 200)
  assert.equal((await post(base, '/api/generate', { model: 'random-model', prompt: 'Hi', stream: false, options: { num_predict: 3 } })).status, 200)

  // A file dropped into the folder is served without a restart.
  await symlink(STORIES, join(folder, 'late.gguf'))
  assert.equal((await post(base, '/api/generate', { model: 'late', prompt: 'Hi', stream: false, options: { num_predict: 2 } })).status, 200)
})
