// One job in a worker thread: lease a sequence, build the input, complete,
// stream pieces, report Ollama's metrics.
//
// Cancellation: LlamaCompletion checks the signal before each token, and with
// stopOnAbortSignal it returns what it has instead of throwing, so a cancel
// message stops generation within one token and still frees the sequence.
// Context shift is off: a reply that fills the context ends with
// done_reason "length" instead of silently forgetting its beginning.

import type { MessagePort } from 'node:worker_threads'
import { LlamaCompletion, type LlamaCompletionGenerationOptions, type Token } from 'node-llama-cpp'
import { FormatBudget } from './format-budget.js'
import { grammarFor } from './grammar.js'
import { formatError } from '../../../errors.js'
import { acquire, host, release, type Hosted } from './model-host.js'
import { buildInput } from './prompt.js'
import { PieceBuffer } from './pieces.js'
import { statusError, type DoneReason, type JobResult, type JobSpec, type RunnerConf, type Sampling } from '../protocol.js'

const now = (): bigint => process.hrtime.bigint()

/** Sampling settings as node-llama-cpp takes them; shared with the in-process benchmark so both run the same. */
export function samplingOptions (s: Sampling, contextSize: number): LlamaCompletionGenerationOptions {
  const penalize = s.repeatLastN !== 0 && (s.repeatPenalty !== 1 || s.presencePenalty !== 0 || s.frequencyPenalty !== 0)
  return {
    temperature: s.temperature,
    topK: s.topK,
    topP: s.topP,
    minP: s.minP,
    seed: s.seed,
    repeatPenalty: penalize
      ? { lastTokens: s.repeatLastN < 0 ? contextSize : s.repeatLastN, penalty: s.repeatPenalty, presencePenalty: s.presencePenalty, frequencyPenalty: s.frequencyPenalty }
      : false,
  }
}

const empty = (doneReason: DoneReason, loadNs: number): JobResult =>
  ({ doneReason, text: '', promptTokens: 0, evalTokens: 0, loadNs, promptNs: 0, evalNs: 0, context: null, truncated: false, embeddings: null })

/** Ollama's deprecated `context` is client data: an id outside the vocabulary would fail inside llama.cpp's decode. */
function checkContext (h: Hosted, job: JobSpec): void {
  if (job.context === null || h.vocabSize === 0) return
  for (const t of job.context) {
    if (t >= h.vocabSize) throw statusError(400, formatError('LB_ERR_GEN_CONTEXT_TOKEN', { token: t, model: job.model, max: h.vocabSize - 1 }))
  }
}

/** Prompt tokens a job may evaluate: LlamaCompletion keeps at most 90% of the context for the input, BOS included. */
function promptLimit (ctxSize: number, conf: RunnerConf): number {
  const fits = ctxSize - Math.max(1, Math.floor(ctxSize / 10)) - 1
  return conf.maxPromptTokens > 0 ? Math.min(fits, conf.maxPromptTokens) : fits
}

export async function generate (id: number, job: JobSpec, conf: RunnerConf, port: MessagePort, signal: AbortSignal): Promise<JobResult> {
  if (signal.aborted) return empty('cancel', 0)
  const { h, loadNs } = await host(job.modelPath)
  if (job.kind === 'load') return empty('load', loadNs)
  if (signal.aborted) return empty('cancel', loadNs)
  checkContext(h, job)
  const lease = await acquire(h, job.numCtx, conf)
  const completion = new LlamaCompletion({ contextSequence: lease.seq })
  const pieces = job.stream ? new PieceBuffer(id, port, conf.streamBatchMs) : null
  try {
    const ctxSize = lease.seq.contextSize
    const limit = promptLimit(ctxSize, conf)
    const input = buildInput(h, job, limit)
    if (input.cut && !job.truncate) {
      throw statusError(400, formatError('LB_ERR_GEN_PROMPT_TOO_LONG', { limit, why: conf.maxPromptTokens > 0 && conf.maxPromptTokens <= limit ? 'generation.max_prompt_tokens' : `num_ctx ${ctxSize}` }))
    }
    const grammar = job.format === null ? undefined : await grammarFor(job.format, job.formatOptional)
    // Tokens the reply may use: num_predict, and what the context leaves after the prompt (+ BOS).
    const promptLen = input.tokens.length + 1
    const room = Math.max(1, ctxSize - promptLen)
    const budget = job.numPredict > 0 ? Math.min(job.numPredict, room) : room
    const fmt = job.format === null ? null : new FormatBudget(job.format, h.model, budget, job.formatOptional)
    let text = ''

    let evalTokens = 0
    let firstAt = 0n
    const generated: Token[] | null = job.returnContext ? [] : null
    // node-llama-cpp holds back a token that ends mid-character and tests maxTokens only once the character is
    // whole, so the batch that ends a reply can pass the budget by one token. As Ollama does, the reply stops at
    // the budget and drops the unfinished character: eval_count never exceeds num_predict, nor usage max_tokens.
    let before: Token[] = []
    let kept: Token[] | null = null
    let dropped = ''
    let keptText = ''
    const opts: LlamaCompletionGenerationOptions = {
      ...samplingOptions(job.sampling, ctxSize),
      maxTokens: budget,
      disableContextShift: true,
      customStopTriggers: input.stops.length > 0 ? input.stops : undefined,
      grammar,
      tokenBias: fmt?.bias,
      signal: fmt === null ? signal : AbortSignal.any([signal, fmt.stop.signal]),
      stopOnAbortSignal: true,
      onToken: (toks) => {
        if (evalTokens === 0) firstAt = now()
        if (evalTokens + toks.length > budget) toks = kept = toks.slice(0, budget - evalTokens)
        else before = toks
        evalTokens += toks.length
        if (generated !== null) for (const t of toks) generated.push(t)
        fmt?.onTokens(toks, evalTokens)
      },
      onTextChunk: (piece) => {
        if (kept !== null) {
          dropped = piece
          piece = keptText = h.model.detokenize(kept, false, before).replace(/\uFFFD+$/, '')
        }
        if (piece === '') return
        if (pieces !== null) pieces.push(piece)
        if (fmt !== null && pieces !== null) text += piece
      },
    }
    const start = now()
    const r = await completion.generateCompletionWithMeta(input.tokens, opts)
    const end = now()
    if (firstAt === 0n) firstAt = end
    const reason = r.metadata.stopReason
    const cancelled = signal.aborted
    if (!job.stream) text = kept !== null && r.response.endsWith(dropped) ? r.response.slice(0, r.response.length - dropped.length) + keptText : r.response
    // With a format, a reply cut by the budget (or a stop sequence) gets the shortest text that completes it.
    if (fmt !== null && job.format !== null && !cancelled) {
      const closing = FormatBudget.close(job.format, text, job.formatOptional)
      if (closing !== '') {
        pieces?.push(closing)
        text += closing
        if (generated !== null) generated.push(...fmt.tokens(closing))
      }
    }
    pieces?.flush()
    return {
      doneReason: cancelled ? 'cancel' : kept !== null || reason === 'maxTokens' || reason === 'abort' ? 'length' : 'stop',
      text: job.stream ? '' : text,
      promptTokens: promptLen,
      evalTokens,
      loadNs,
      promptNs: Number(firstAt - start),
      evalNs: Number(end - firstAt),
      context: generated === null ? null : [...input.tokens, ...generated],
      truncated: input.cut,
      embeddings: null,
    }
  } finally {
    pieces?.flush()
    completion.dispose({ disposeSequence: false })
    release(lease)
  }
}
