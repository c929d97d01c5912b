// Where a request for model M goes, whichever client API asked: the one code
// path of /api/generate, /api/chat, /v1/completions and /v1/chat/completions.
// It applies the limits both APIs share, resolves an alias, and finds the
// model: a local one (the catalog) is served here, as a job for the local
// scheduler whose life (time-out, client gone, runner failure) this file
// owns; otherwise the remote servers that list M, then M's fallbacks
// (remote/run.ts), and a fallback that is local is served here again. What the
// client sees is written by the API's ReplyWriter, from the same events
// whether the reply came from the local runner or a remote server.

import type { IncomingMessage, ServerResponse } from 'node:http'
import { ERRORS, formatError } from '../../errors.js'
import type { Logger } from '../../log.js'
import type { Budget, Meter } from '../budget/budget.js'
import { type Consumer, mayUse } from '../budget/consumer.js'
import type { GenerationConf } from '../config.js'
import type { JobResult, JobSpec, Sampling } from '../local/protocol.js'
import type { JobSink, Scheduler } from '../local/scheduler.js'
import type { ModelCatalog, ModelEntry } from '../models/catalog.js'
import { contextLength } from '../models/gguf.js'
import { parseOptions } from '../ollama/request.js'
import type { RemoteRegistry } from '../remote/registry.js'
import { generateRemote } from '../remote/run.js'
import { outcomeOf, type GenOutcome, type GenStats } from '../stats.js'
import { LOCAL, type ModelUsage, type UsageTap } from './model-usage.js'
import { type ApiError, type GenRequest, isApiError, type RequestOptions } from './request.js'

export const BUSY_MESSAGE = 'server busy, please try again.  maximum pending requests exceeded'

/** What serving a request needs; one per service. */
export interface GenEnv {
  conf: GenerationConf
  catalog: ModelCatalog
  scheduler: Scheduler
  /** The remote model servers, aliases and fallbacks (no servers: aliases still apply to local models). */
  remote: RemoteRegistry
  log: Logger
  requests: GenStats['requests']
  /** API keys, consumers and their budgets (core/gen/budget/). */
  budget: Budget
  /** Requests, tokens, in flight, TTFT and TPOT per (server, model) (model-usage.ts). */
  usage: ModelUsage
}

/** One request's reply in its API's wire shape (ollama/reply.ts, openai/reply.ts); each holds its response. */
export interface ReplyWriter {
  /** Consecutive streamed pieces of text; `ts` is the batch's arrival time. */
  pieces (texts: readonly string[], ts: string): void
  done (r: JobResult, totalNs: number): void
  /** A loadOnly request ended: the model is loaded (or unloaded). */
  loaded (reason: 'load' | 'unload'): void
  /** A refusal or failure: the API's error body before anything was sent, its in-stream error after. */
  fail (e: ApiError): void
}

/** The answer to a request for a model that no server has, in each API's words (OpenAI's code: model_not_found). */
export const modelNotFound = (displayModel: string): ApiError =>
  ({ status: 404, message: `model '${displayModel}' not found`, param: 'model', code: 'model_not_found' })

// Ollama's defaults (api/types.go DefaultOptions) for what a request and the model leave unset.
const DEFAULTS = { temperature: 0.8, topK: 40, topP: 0.9, minP: 0, repeatPenalty: 1.1, repeatLastN: 64, presencePenalty: 0, frequencyPenalty: 0 }

/** The model's default options (an Ollama store's params layer) under the request's. */
export function effectiveOptions (e: ModelEntry, r: RequestOptions): RequestOptions {
  const fromModel = e.params === null ? {} : parseOptions(e.params)
  return { ...(isApiError(fromModel) ? {} : fromModel), ...r }
}

/** Context window per sequence: the request's or the config's, capped by what the model was trained for. */
export const numCtxOf = (conf: GenerationConf, want: number | undefined, modelCtx: number): number =>
  Math.max(16, modelCtx > 0 ? Math.min(want ?? conf.numCtx, modelCtx) : (want ?? conf.numCtx))

function buildJob (conf: GenerationConf, r: GenRequest, e: ModelEntry, modelCtx: number): JobSpec {
  const o = effectiveOptions(e, r.options)
  const seed = o.seed !== undefined && o.seed >= 0 ? o.seed : Math.floor(Math.random() * 2 ** 31)
  const sampling: Sampling = {
    temperature: o.temperature ?? DEFAULTS.temperature,
    topK: o.topK ?? DEFAULTS.topK,
    topP: o.topP ?? DEFAULTS.topP,
    minP: o.minP ?? DEFAULTS.minP,
    seed,
    repeatPenalty: o.repeatPenalty ?? DEFAULTS.repeatPenalty,
    repeatLastN: o.repeatLastN ?? DEFAULTS.repeatLastN,
    presencePenalty: o.presencePenalty ?? DEFAULTS.presencePenalty,
    frequencyPenalty: o.frequencyPenalty ?? DEFAULTS.frequencyPenalty,
  }
  return {
    kind: r.loadOnly ? 'load' : r.endpoint,
    model: r.model,
    modelPath: e.path,
    numCtx: numCtxOf(conf, o.numCtx, modelCtx),
    stream: r.stream,
    prompt: r.prompt,
    system: r.system ?? e.system,
    raw: r.raw,
    context: r.context,
    messages: r.messages,
    format: r.format,
    formatOptional: r.formatOptional,
    sampling,
    numPredict: o.numPredict !== undefined && o.numPredict > 0 ? o.numPredict : conf.maxNumPredict > 0 ? conf.maxNumPredict : -1,
    stop: o.stop ?? [],
    returnContext: r.endpoint === 'generate' && !r.raw,
    truncate: r.truncate,
    inputs: null,
  }
}

/** The prompt bytes of a request: its texts, as max_prompt_bytes counts them. */
function promptBytes (r: GenRequest): number {
  let size = Buffer.byteLength(r.prompt) + (r.system === null ? 0 : Buffer.byteLength(r.system))
  for (const m of r.messages ?? []) size += Buffer.byteLength(m.content)
  return size
}

/**
 * The tokens a request is reserved in its consumer's budget while it runs (core/gen/budget/ledger.ts): the most
 * lb knows it may use before it runs. Its completion's cap (num_predict, max_tokens, else max_num_predict; none:
 * 0, unknown) plus one token per byte of its texts (a token stands for at least one byte of text; a chat
 * template's own tokens are not counted).
 */
export function reservation (conf: GenerationConf, r: GenRequest): number {
  const n = r.options.numPredict
  return (n !== undefined && n > 0 ? n : conf.maxNumPredict > 0 ? conf.maxNumPredict : 0) + promptBytes(r)
}

/** The bytes limit of the texts of a request (prompts, messages, texts to embed); null when within. */
export function overPromptBytes (conf: GenerationConf, size: number): ApiError | null {
  if (conf.maxPromptBytes <= 0 || size <= conf.maxPromptBytes) return null
  return { status: ERRORS.LB_ERR_GEN_PROMPT_TOO_LARGE.status, message: formatError('LB_ERR_GEN_PROMPT_TOO_LARGE', { size, limit: conf.maxPromptBytes }), code: 'LB_ERR_GEN_PROMPT_TOO_LARGE' }
}

/**
 * The per-request limits the API process can check before any model work: prompt bytes and
 * num_predict (the token limit needs the tokenizer: the runner applies it, tokenizing only the end).
 */
export function overLimit (conf: GenerationConf, r: GenRequest): ApiError | null {
  const over = overPromptBytes(conf, promptBytes(r))
  if (over !== null) return over
  const n = r.options.numPredict
  if (conf.maxNumPredict > 0 && n !== undefined && n > conf.maxNumPredict) {
    return {
      status: ERRORS.LB_ERR_GEN_NUM_PREDICT.status,
      message: formatError('LB_ERR_GEN_NUM_PREDICT', { field: r.numPredictField, value: n, limit: conf.maxNumPredict }),
      param: r.numPredictField,
      code: 'LB_ERR_GEN_NUM_PREDICT',
    }
  }
  return null
}

/**
 * Whether `who` may use the model a request names; when not, the refusal is counted and the answer is the
 * one for a model that does not exist (OpenAI's 404 for a model the key cannot see: nothing says it exists).
 */
export function allowed (env: GenEnv, who: Consumer, model: string): boolean {
  if (mayUse(who, model)) return true
  env.budget.refusedModel(who)
  return false
}

/**
 * Admits the request of `who` against its budget, submits `spec` and ties it to the client (its sink writes
 * the reply): a client that goes away cancels it, request_timeout cancels it and `fail`s it with a 504.
 * The sink is wrapped by the budget's meter, so however the job ends its consumer is charged once.
 * `reserve`: the tokens the request may use, as far as lb knows before it runs (reservation()).
 * Returns 0: the outcome is counted here (a 429 over budget, a 503 when the queue is full) or when the job ends.
 * `tap`: the request's per-model usage, told how it ended (null: not counted per model, as embeddings).
 */
export async function runJob (env: GenEnv, req: IncomingMessage, res: ServerResponse, spec: JobSpec, keepAliveMs: number, sizeBytes: number,
  endpoint: keyof GenStats['requests'], sink: JobSink, fail: (e: ApiError) => void, who: Consumer, reserve: number, tap: UsageTap | null = null): Promise<number> {
  let ticket = env.budget.admit(who, reserve)
  // a Promise only in cluster mode, past this node's lease
  if (ticket instanceof Promise) ticket = await ticket
  if (isApiError(ticket)) {
    env.requests[endpoint].client_error++
    tap?.leave()
    fail(ticket)
    return 0
  }
  // taken by the local server from here on (a request over budget never was): its end is counted there
  tap?.at(LOCAL, spec.model)
  const metered = env.budget.meter(who, ticket, sink)
  let finished = false
  let timer: NodeJS.Timeout | null = null
  const end = (outcome: GenOutcome): void => {
    finished = true
    if (timer !== null) clearTimeout(timer)
    env.requests[endpoint][outcome]++
    tap?.end(outcome)
  }
  const counted: JobSink = {
    pieces: (texts, ts) => metered.pieces(texts, ts),
    done: (result) => { end('ok'); metered.done(result) },
    fail: (status, message) => { end(outcomeOf(status)); metered.fail(status, message) },
  }
  const id = env.scheduler.submit(spec, keepAliveMs, sizeBytes, counted)
  if (id === 0) {
    end('busy')
    metered.refund() // it never ran: not counted in the requests per minute
    fail({ status: 503, message: BUSY_MESSAGE, code: 'server_busy' })
    return 0
  }
  const gone = (): void => {
    if (finished) return
    end('cancelled')
    metered.release()
    env.scheduler.cancel(id)
  }
  res.on('close', gone)
  // The client may have left while the body was read or the model looked up.
  if (req.socket.destroyed) gone()
  req.on('error', () => undefined)
  const limit = env.conf.requestTimeoutMs
  if (limit > 0) {
    timer = setTimeout(() => {
      if (finished) return
      end('timeout')
      metered.release()
      env.scheduler.cancel(id, env.conf.cancelGraceMs)
      fail({ status: ERRORS.LB_ERR_GEN_TIMEOUT.status, message: formatError('LB_ERR_GEN_TIMEOUT', { seconds: limit / 1000 }), code: 'LB_ERR_GEN_TIMEOUT' })
    }, limit)
  }
  return 0
}

/** Serves a text request. Returns the status of an answer given at once (counted by the caller), else 0. */
export async function generation (env: GenEnv, req: IncomingMessage, res: ServerResponse, r: GenRequest | ApiError, writer: ReplyWriter, who: Consumer): Promise<number> {
  if (isApiError(r)) return refuse(writer, r)
  const over = overLimit(env.conf, r)
  if (over !== null) return refuse(writer, over)
  if (r.model === '') return refuse(writer, modelNotFound(r.displayModel))
  // the name the client asked (an alias is allowed or not as such)
  if (!allowed(env, who, r.model)) return refuse(writer, modelNotFound(r.displayModel))
  // the model and its fallbacks: local ones are served here, remote ones by remote/run.ts, in this order
  const names = env.remote.chain(r.model)
  let local: ModelEntry | null = null
  let firstLocal = names.length
  for (let i = 0; i < names.length && local === null; i++) {
    // a name a remote server lists does not wait for the models folder to be read again
    local = env.remote.knows(names[i]!) ? env.catalog.peek(names[i]!) : await env.catalog.lookup(names[i]!)
    if (local !== null) firstLocal = i
  }
  // the request's usage per (server, model), fed by its writer and its end, whichever server serves it
  const tap = env.usage.tap(req, r.stream)
  writer = tappedWriter(writer, tap)
  if (firstLocal > 0) {
    await env.remote.ready()
    // a model nobody serves is a 404 whatever the budget
    if (local === null && !names.some((n) => env.remote.knows(n))) return refuse(writer, modelNotFound(r.displayModel))
    let ticket = env.budget.admit(who, reservation(env.conf, r))
    if (ticket instanceof Promise) ticket = await ticket
    if (isApiError(ticket)) return refuse(writer, ticket)
    const m = env.budget.meterOf(who, ticket)
    // the request's end is counted (and its ticket released) before its result is written: the result's tokens win
    const count = (o: GenOutcome): void => { env.requests[r.endpoint][o]++; tap.end(o); m.release() }
    const attempt = (server: string, model: string): void => tap.at(server, model)
    const out = await generateRemote({ registry: env.remote, requestTimeoutMs: env.conf.requestTimeoutMs, log: env.log, count, attempt }, req, res, r, names.slice(0, firstLocal), meteredWriter(writer, m))
    if (out.served) return 0
    m.refund() // no server started it: the local model (or the refusal) decides alone
    if (local === null) {
      const status = refuse(writer, out.error ?? modelNotFound(r.displayModel))
      tap.end(outcomeOf(status)) // the last server asked failed (a no-op when none was)
      return status
    }
  }
  const e = local!
  r.model = e.name
  const keepAliveMs = r.keepAliveMs ?? env.conf.keepAliveMs
  if (r.loadOnly && keepAliveMs === 0) {
    env.scheduler.unload(r.model)
    writer.loaded('unload')
    tap.leave() // not a request a model served
    return 200
  }
  const info = await env.catalog.info(e).catch(() => null)
  const spec = buildJob(env.conf, r, e, info === null ? 0 : contextLength(info))
  const started = process.hrtime.bigint()
  const sink: JobSink = {
    pieces: (texts, ts) => writer.pieces(texts, ts),
    done (result: JobResult) {
      if (result.truncated) env.log.warn('truncating input prompt', { model: r.model, kept: result.promptTokens })
      if (spec.kind === 'load') writer.loaded('load')
      else writer.done(result, Number(process.hrtime.bigint() - started))
    },
    fail: (status, message) => writer.fail({ status, message }),
  }
  return await runJob(env, req, res, spec, keepAliveMs, e.size, r.endpoint, sink, (x) => writer.fail(x), who, reservation(env.conf, r), tap)
}

/** `writer` telling the request's usage tap its pieces and its result (a loadOnly request has no tokens to count). */
function tappedWriter (writer: ReplyWriter, tap: UsageTap): ReplyWriter {
  return {
    pieces (texts, ts) { tap.piece(); writer.pieces(texts, ts) },
    done (r, totalNs) { tap.done(r.promptTokens, r.evalTokens); writer.done(r, totalNs) },
    loaded: (reason) => writer.loaded(reason),
    fail: (e) => writer.fail(e),
  }
}

/** `writer` counting what reaches the client and charging the result's tokens to the request's meter. */
function meteredWriter (writer: ReplyWriter, m: Meter): ReplyWriter {
  return {
    pieces (texts, ts) { m.streamed(texts.length); writer.pieces(texts, ts) },
    done (r, totalNs) { m.used(r.promptTokens, r.evalTokens); writer.done(r, totalNs) },
    loaded: (reason) => writer.loaded(reason),
    fail: (e) => writer.fail(e),
  }
}

function refuse (writer: ReplyWriter, e: ApiError): number {
  writer.fail(e)
  return e.status
}
