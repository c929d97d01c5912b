// Embeddings in a worker thread: one LlamaEmbeddingContext per loaded model
// (an llama context made for embeddings: the model's pooled hidden state,
// not sampled tokens), made on first use at the job's context size and kept
// until the model is unloaded or another size is asked. Its one sequence
// evaluates one text at a time (node-llama-cpp locks it); concurrent jobs
// queue there, and the API process bounds how many run per model.
//
// A text longer than the context keeps its start, as Ollama truncates
// embedding inputs (`truncate: false`: the job fails with 400 instead).
// Tokenization is linear (tokens.ts), so a long text costs no more than the
// context it is cut to. Any model can embed here; every fixture does.

import type { LlamaEmbeddingContext, Token } from 'node-llama-cpp'
import { host, type Hosted } from './model-host.js'
import { statusError, type JobResult, type JobSpec, type RunnerConf } from '../protocol.js'
import { tokenizeLinear } from './tokens.js'

const contexts = new WeakMap<Hosted, { size: number, ctx: Promise<LlamaEmbeddingContext> }>()

async function embedder (h: Hosted, size: number, conf: RunnerConf): Promise<LlamaEmbeddingContext> {
  const have = contexts.get(h)
  if (have !== undefined && have.size === size) return await have.ctx
  // another size: the old context goes once its evaluations end (dispose waits for none; node-llama-cpp's lock serialises)
  if (have !== undefined) void have.ctx.then((c) => c.dispose(), () => undefined)
  // one batch holds the whole text: pooling reads every token's state at once
  const ctx = h.model.createEmbeddingContext({ contextSize: size, batchSize: size, threads: conf.threads })
  contexts.set(h, { size, ctx })
  ctx.catch(() => contexts.delete(h))
  return await ctx
}

export async function embed (job: JobSpec, conf: RunnerConf, signal: AbortSignal): Promise<JobResult> {
  const { h, loadNs } = await host(job.modelPath)
  const ctx = await embedder(h, job.numCtx, conf)
  // room for the text with the BOS and EOS tokens the context adds, below the context size
  const limit = Math.max(1, job.numCtx - 3)
  const bos = h.model.tokens.bos
  const vectors: number[][] = []
  let promptTokens = 0
  let truncated = false
  const start = process.hrtime.bigint()
  for (const text of job.inputs ?? []) {
    if (signal.aborted) break
    // only the start can be kept: tokenize a prefix, longer ones until it holds more than `limit` tokens or is the text
    let tokens: Token[]
    for (let n = limit * 8; ; n *= 4) {
      const part = text.length > n ? text.slice(0, n) : text
      tokens = tokenizeLinear(h.model, part)
      if (part === text || tokens.length > limit) break
    }
    if (tokens.length > limit) {
      if (!job.truncate) throw statusError(400, `input of ${tokens.length}+ tokens is longer than the context length ${job.numCtx} of model ${job.model} and "truncate" is false`)
      tokens = tokens.slice(0, limit)
      truncated = true
    }
    // an empty text is embedded as the start of a text (BOS), so every vector has the model's size
    if (tokens.length === 0 && bos !== null) tokens = [bos]
    promptTokens += tokens.length + 1
    vectors.push([...(await ctx.getEmbeddingFor(tokens)).vector])
  }
  const ns = Number(process.hrtime.bigint() - start)
  return {
    doneReason: signal.aborted ? 'cancel' : 'stop', text: '', promptTokens, evalTokens: 0, loadNs, promptNs: ns, evalNs: 0,
    context: null, truncated, embeddings: vectors,
  }
}
