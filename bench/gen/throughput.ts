// Generation benchmark: the HTTP endpoint against node-llama-cpp called in
// this process, on the same model with the same settings, in the same run
// (the machine is shared and noisy, so only ratios measured together mean
// anything). Prints a markdown report.
//
//   node dist/bench/gen/throughput.js [model.gguf] [--tokens N] [--rounds N] [--only single|concurrency]
//        [--stream-batch 50ms] [--layouts 8x1,4x2,2x4,1x8]
//
// The default model is ../shared/models/stories260K.gguf. For a model where
// batching pays, make one first (bench/gen/make-model.ts) and pass its path:
//   node dist/bench/gen/throughput.js --only concurrency --tokens 200 $(node dist/bench/gen/make-model.js)
//
// Each round measures the compared variants back to back and the report gives
// the median of the per-round ratios, so a load change between rounds (other
// processes on the machine) does not masquerade as a difference.
//
// 1. single stream: tokens/s through HTTP (stream true and false) / in-process;
// 2. aggregate tokens/s at 1, 2, 4, 8 concurrent requests (max(3, rounds / 3)
//    rounds), through HTTP and in-process, for several layouts (sequences per
//    context x contexts per model); in-process contexts are made as the
//    endpoint makes them (core/gen/local/runner/batch-order.ts), and N=8 / N=1 with
//    node-llama-cpp's default contexts for comparison;
// 3. time to first token added by the endpoint (HTTP TTFT - in-process TTFT).

import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { getLlama, LlamaCompletion, LlamaLogLevel, type LlamaContext } from 'node-llama-cpp'
import { request } from 'undici'
import { Checker } from '../../core/config/check.js'
import { createOrderedContext } from '../../core/gen/local/runner/batch-order.js'
import { checkGeneration } from '../../core/gen/config.js'
import { samplingOptions } from '../../core/gen/local/runner/generate.js'
import type { Sampling } from '../../core/gen/local/protocol.js'
import { startGeneration, type GenerationService } from '../../core/gen/service.js'
import { createLogger } from '../../core/log.js'

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..')
const args = process.argv.slice(2)
const flag = (name: string, def: number): number => { const i = args.indexOf(name); return i >= 0 ? Number(args[i + 1]) : def }
const MODEL = args.find((a) => a.endsWith('.gguf')) ?? resolve(REPO, '..', 'shared', 'models', 'stories260K.gguf')
const TOKENS = flag('--tokens', 400)
const ROUNDS = flag('--rounds', 9)
const STREAM_BATCH = args.includes('--stream-batch') ? args[args.indexOf('--stream-batch') + 1]! : ''
const ONLY = args.includes('--only') ? args[args.indexOf('--only') + 1] : ''
const LAYOUTS = (args.includes('--layouts') ? args[args.indexOf('--layouts') + 1]! : '8x1,4x2,2x4,1x8')
  .split(',').map((l) => l.split('x').map(Number) as [number, number])
const NUM_CTX = 1024
const PROMPT = 'Once upon a time'
// Ollama's defaults, as the endpoint applies them; the seed varies per request.
const sampling = (seed: number): Sampling => ({ temperature: 0.8, topK: 40, topP: 0.9, minP: 0, seed, repeatPenalty: 1.1, repeatLastN: 64, presencePenalty: 0, frequencyPenalty: 0 })
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]! }
const f0 = (x: number): string => x.toFixed(0)
const f2 = (x: number): string => x.toFixed(2)

// ---- in-process reference ----
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error })
const model = await llama.loadModel({ modelPath: MODEL, defaultContextFlashAttention: false })
const refCtx = await model.createContext({ sequences: 1, threads: 1, contextSize: NUM_CTX, flashAttention: false })
const refSeq = refCtx.getSequence()

async function inProcess (seed: number): Promise<{ tokens: number, ms: number, ttftMs: number }> {
  const c = new LlamaCompletion({ contextSequence: refSeq })
  let tokens = 0
  let first = 0
  const t = performance.now()
  await c.generateCompletionWithMeta(PROMPT, {
    ...samplingOptions(sampling(seed), refSeq.contextSize),
    maxTokens: TOKENS,
    disableContextShift: true,
    onToken: (ts) => { tokens += ts.length },
    onTextChunk: () => { if (first === 0) first = performance.now() },
  })
  const ms = performance.now() - t
  c.dispose({ disposeSequence: false })
  return { tokens, ms, ttftMs: first - t }
}

/**
 * The engine's own ceiling: n concurrent completions in this process, spread
 * over `contexts` contexts of `parallel` sequences, made as the endpoint makes
 * them (`ordered`, core/gen/local/runner/batch-order.ts) or as node-llama-cpp does by default.
 */
async function inProcessConcurrent (n: number, parallel: number, contexts: number, round: number, ordered: boolean): Promise<number> {
  const ctxs: Array<{ context: LlamaContext, active: number, recheck: () => void }> = []
  for (let i = 0; i < Math.min(contexts, n); i++) {
    const c = { context: null as unknown as LlamaContext, active: 0, recheck: () => undefined }
    if (ordered) Object.assign(c, await createOrderedContext(model, parallel, 1, NUM_CTX, () => c.active))
    else c.context = await model.createContext({ sequences: parallel, threads: 1, contextSize: NUM_CTX, flashAttention: false })
    ctxs.push(c)
  }
  let tokens = 0
  const t = performance.now()
  await Promise.all(Array.from({ length: n }, async (_, i) => {
    const ctx = ctxs[i % ctxs.length]!
    ctx.active++
    const seq = ctx.context.getSequence()
    const c = new LlamaCompletion({ contextSequence: seq })
    await c.generateCompletionWithMeta(PROMPT, {
      ...samplingOptions(sampling(1000 * round + i), seq.contextSize), maxTokens: TOKENS, disableContextShift: true, onToken: (ts) => { tokens += ts.length },
    })
    ctx.active--
    ctx.recheck()
  }))
  const rate = tokens / (performance.now() - t) * 1000
  for (const c of ctxs) await c.context.dispose()
  return rate
}

// ---- through HTTP ----
async function startService (parallel: number, contexts: number, dir: string): Promise<{ svc: GenerationService, base: string }> {
  const c = new Checker()
  const conf = checkGeneration(c, {
    socket: join(dir, `gen-${parallel}x${contexts}.sock`), listen: '127.0.0.1:0', ollama_models: 'off', builtin_model: false,
    parallel, contexts, num_ctx: NUM_CTX, models: { bench: MODEL }, ...(STREAM_BATCH === '' ? {} : { stream_batch: STREAM_BATCH }),
  }, 'generation', dir)
  if (c.problems.length > 0) throw new Error(c.problems.join('\n'))
  const svc = await startGeneration(conf, createLogger('error'))
  await svc.ready()
  return { svc, base: `http://127.0.0.1:${svc.tcpAddress!.port}` }
}

async function http (base: string, seed: number, stream: boolean, tokens = TOKENS): Promise<{ tokens: number, ms: number, ttftMs: number }> {
  const body = JSON.stringify({ model: 'bench', prompt: PROMPT, stream, options: { seed, num_predict: tokens } })
  const t = performance.now()
  const r = await request(`${base}/api/generate`, { method: 'POST', body })
  let first = 0
  let text = ''
  for await (const chunk of r.body) {
    if (first === 0) first = performance.now()
    text += chunk.toString()
  }
  const ms = performance.now() - t
  const last = JSON.parse(text.trimEnd().split('\n').pop()!) as { eval_count: number }
  return { tokens: last.eval_count, ms, ttftMs: first - t }
}

const dir = await mkdtemp(join(tmpdir(), 'lb-bench-gen-'))
const out: string[] = []
const say = (s: string): void => { out.push(s); console.log(s) }
say(`model: ${MODEL.split('/').pop()}, ${TOKENS} tokens per request, num_ctx ${NUM_CTX}, threads 1 per context, ${ROUNDS} rounds, node ${process.version}`)

// 1 + 3: single stream and TTFT, alternating in-process and HTTP so noise hits both alike.
if (ONLY === '' || ONLY === 'single') {
  const { svc, base } = await startService(4, 2, dir)
  await http(base, 0, false, 8)
  await inProcess(0)
  const ref: number[] = []
  const streamRatio: number[] = []
  const jsonRatio: number[] = []
  let sameCount = true
  for (let r = 0; r < ROUNDS; r++) {
    const a = await inProcess(100 + r)
    const b = await http(base, 100 + r, true)
    const c = await http(base, 100 + r, false)
    const ra = a.tokens / a.ms * 1000
    ref.push(ra)
    streamRatio.push(b.tokens / b.ms * 1000 / ra)
    jsonRatio.push(c.tokens / c.ms * 1000 / ra)
    sameCount &&= a.tokens === b.tokens && b.tokens === c.tokens
  }
  say('')
  say('### Single stream: HTTP endpoint / node-llama-cpp in-process (median of per-round ratios)')
  say('| in-process tokens/s (median) | HTTP stream=true | HTTP stream=false |')
  say('|---|---|---|')
  say(`| ${f0(median(ref))} | **${f2(median(streamRatio))}** (min ${f2(Math.min(...streamRatio))}) | **${f2(median(jsonRatio))}** (min ${f2(Math.min(...jsonRatio))}) |`)
  say(`same seeds on both sides; identical token counts in every round: ${sameCount}`)

  const added: number[] = []
  const ttRef: number[] = []
  for (let r = 0; r < ROUNDS * 4; r++) {
    const a = (await inProcess(200 + r)).ttftMs
    const b = (await http(base, 200 + r, true, 4)).ttftMs
    ttRef.push(a)
    added.push(b - a)
  }
  say('')
  say('### Time to first token added by the endpoint, ms (median of per-round differences)')
  say('| in-process TTFT | added by HTTP + IPC + worker hop |')
  say('|---|---|')
  say(`| ${f2(median(ttRef))} | **${f2(median(added))}** (p90 ${f2([...added].sort((x, y) => x - y)[Math.floor(added.length * 0.9)]!)}) |`)
  await svc.close()
}

// 2: concurrency, per layout; each round runs N = 1, 2, 4, 8 back to back, in-process then through HTTP.
if (ONLY === '' || ONLY === 'concurrency') {
  const LEVELS = [1, 2, 4, 8]
  const rows: string[] = []
  for (const [parallel, contexts] of LAYOUTS) {
    const { svc, base } = await startService(parallel, contexts, dir)
    await Promise.all(Array.from({ length: 8 }, (_, i) => http(base, i, false, 8)))
    const viaHttp: number[][] = LEVELS.map(() => [])
    const engine: number[][] = LEVELS.map(() => [])
    const plainGain: number[] = []
    const gain: number[] = []
    const engineGain: number[] = []
    const kept: number[] = []
    for (let r = 0; r < Math.max(3, Math.ceil(ROUNDS / 3)); r++) {
      for (let k = 0; k < LEVELS.length; k++) {
        const n = LEVELS[k]!
        engine[k]!.push(await inProcessConcurrent(n, parallel, contexts, r, true))
        const t = performance.now()
        const res = await Promise.all(Array.from({ length: n }, (_, i) => http(base, 1000 * r + i, true)))
        viaHttp[k]!.push(res.reduce((s, x) => s + x.tokens, 0) / (performance.now() - t) * 1000)
      }
      plainGain.push(await inProcessConcurrent(8, parallel, contexts, r, false) / await inProcessConcurrent(1, parallel, contexts, r, false))
      gain.push(viaHttp[3]![r]! / viaHttp[0]![r]!)
      engineGain.push(engine[3]![r]! / engine[0]![r]!)
      kept.push(viaHttp[3]![r]! / engine[3]![r]!)
    }
    const cells = (xs: number[][]): string => xs.map((x) => f0(median(x))).join(' / ')
    rows.push(`| ${parallel} x ${contexts} | ${cells(viaHttp)} | ${cells(engine)} | **${f2(median(gain))}** | ${f2(median(engineGain))} | ${f2(median(plainGain))} | ${f2(median(kept))} |`)
    await svc.close()
  }
  say('')
  say('### Aggregate tokens/s at N = 1 / 2 / 4 / 8 concurrent requests (stream=true; medians of rounds, ratios: median of per-round ratios)')
  say('| layout (sequences per context x contexts) | HTTP | in-process | HTTP N=8 / N=1 | in-process N=8 / N=1 | node-llama-cpp default contexts, in-process N=8 / N=1 | HTTP / in-process at N=8 |')
  say('|---|---|---|---|---|---|---|')
  for (const row of rows) say(row)
}

await rm(dir, { recursive: true, force: true })
await refCtx.dispose()
await model.dispose()
process.exit(0)
