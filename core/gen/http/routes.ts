// The HTTP surface: a route table (method, path, handler) and the handlers of
// /api/generate and /api/chat, which turn a checked request into a job, hand
// it to the scheduler and write its pieces as they come back.

import type { IncomingMessage, ServerResponse } from 'node:http'
import { formatError, ERRORS } from '../../errors.js'
import type { Logger } from '../../log.js'
import { isApiError, parseChat, parseGenerate, parseOptions, type GenRequest, type RequestOptions } from '../ollama/request.js'
import type { GenerationConf } from '../config.js'
import { OLLAMA_VERSION, ps, show, tags } from '../ollama/info.js'
import type { ModelCatalog, ModelEntry } from '../models/catalog.js'
import { contextLength } from '../models/gguf.js'
import { parseModelName } from '../models/names.js'
import type { JobResult, JobSpec, Sampling } from '../local/protocol.js'
import { nowIso, ReplyWriter, sendError, sendJson, sendText } from '../ollama/reply.js'
import type { JobSink, Scheduler } from '../local/scheduler.js'
import { outcomeOf, type GenEndpoint, type GenOutcome, type GenStats } from '../stats.js'

const MAX_BODY = 16 << 20
export const BUSY_MESSAGE = 'server busy, please try again.  maximum pending requests exceeded'

export interface RouteEnv {
  conf: GenerationConf
  catalog: ModelCatalog
  scheduler: Scheduler
  log: Logger
  requests: GenStats['requests']
}

type Handler = (env: RouteEnv, req: IncomingMessage, res: ServerResponse, body: unknown) => Promise<number>
interface Route { method: 'GET' | 'POST', path: string, endpoint: GenEndpoint, body: boolean, handler: Handler }

const json = (res: ServerResponse, status: number, o: unknown): number => {
  sendJson(res, status, JSON.stringify(o))
  return status
}
const error = (res: ServerResponse, status: number, message: string): number => {
  sendError(res, status, message)
  return status
}
const text = (t: string): Handler => async (_e, _q, res) => { sendText(res, 200, t); return 200 }

async function showHandler (env: RouteEnv, _q: IncomingMessage, res: ServerResponse, body: unknown): Promise<number> {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
  const raw = typeof b.model === 'string' ? b.model : typeof b.name === 'string' ? b.name : ''
  if (raw === '') return error(res, 400, 'model is required')
  const name = parseModelName(raw)
  const e = name === null ? null : await env.catalog.lookup(name)
  if (e === null) return error(res, 404, `model '${raw}' not found`)
  return json(res, 200, await show(env.catalog, e))
}

export const ROUTES: readonly Route[] = [
  { method: 'GET', path: '/', endpoint: 'other', body: false, handler: text('Ollama is running') },
  { method: 'GET', path: '/health', endpoint: 'other', body: false, handler: text('ok') },
  { method: 'GET', path: '/api/health', endpoint: 'other', body: false, handler: text('ok') },
  { method: 'GET', path: '/api/version', endpoint: 'version', body: false, handler: async (_e, _q, res) => json(res, 200, { version: OLLAMA_VERSION }) },
  { method: 'GET', path: '/api/tags', endpoint: 'tags', body: false, handler: async (env, _q, res) => json(res, 200, await tags(env.catalog)) },
  { method: 'GET', path: '/api/ps', endpoint: 'ps', body: false, handler: async (env, _q, res) => json(res, 200, await ps(env.catalog, env.scheduler.loaded())) },
  { method: 'POST', path: '/api/show', endpoint: 'show', body: true, handler: showHandler },
  { method: 'POST', path: '/api/generate', endpoint: 'generate', body: true, handler: (env, q, res, b) => generation(env, q, res, parseGenerate(b)) },
  { method: 'POST', path: '/api/chat', endpoint: 'chat', body: true, handler: (env, q, res, b) => generation(env, q, res, parseChat(b)) },
]

/** Reads a JSON body; returns the value or an error already answered (as a status). */
function readBody (req: IncomingMessage, res: ServerResponse): Promise<{ value: unknown } | number> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size > MAX_BODY) {
        req.removeAllListeners('data')
        req.resume()
        resolve(error(res, 413, `request body larger than ${MAX_BODY} bytes`))
      } else {
        chunks.push(c)
      }
    })
    req.on('error', () => resolve(499))
    req.on('end', () => {
      if (size > MAX_BODY) return
      if (size === 0) return resolve(error(res, 400, 'missing request body'))
      try {
        resolve({ value: JSON.parse(Buffer.concat(chunks, size).toString('utf8')) })
      } catch (e) {
        resolve(error(res, 400, `invalid JSON: ${(e as Error).message}`))
      }
    })
  })
}

export function createHandler (env: RouteEnv): (req: IncomingMessage, res: ServerResponse) => void {
  const count = (endpoint: GenEndpoint, outcome: GenOutcome): void => { env.requests[endpoint][outcome]++ }
  return (req, res) => {
    const url = req.url ?? '/'
    const q = url.indexOf('?')
    const path = q < 0 ? url : url.slice(0, q)
    const method = req.method === 'HEAD' ? 'GET' : req.method
    let route: Route | null = null
    let known = false
    for (const r of ROUTES) {
      if (r.path !== path) continue
      known = true
      if (r.method === method) { route = r; break }
    }
    if (route === null) {
      req.resume()
      sendText(res, known ? 405 : 404, known ? '405 method not allowed' : '404 page not found')
      count('other', 'client_error')
      return
    }
    const r = route
    void (async () => {
      let body: unknown = null
      if (r.body) {
        const b = await readBody(req, res)
        if (typeof b === 'number') return count(r.endpoint, b === 499 ? 'cancelled' : outcomeOf(b))
        body = b.value
      } else {
        req.resume()
      }
      const status = await r.handler(env, req, res, body)
      // generation() counts its own outcome when the job ends (status 0).
      if (status !== 0) count(r.endpoint, status === 499 ? 'cancelled' : outcomeOf(status))
    })().catch((e: Error) => {
      env.log.error('generation API handler failed', { path, err: e.message })
      if (!res.headersSent) sendError(res, 500, `internal error: ${e.message}`)
      else res.destroy()
      count(r.endpoint, 'error')
    })
  }
}

// Ollama's defaults (api/types.go DefaultOptions) for what a request and the model leave unset.
const DEFAULTS = { temperature: 0.8, topK: 40, topP: 0.9, minP: 0, repeatPenalty: 1.1, repeatLastN: 64, presencePenalty: 0, frequencyPenalty: 0, numPredict: -1 }

function buildJob (env: RouteEnv, r: GenRequest, e: ModelEntry, modelCtx: number, kind: JobSpec['kind']): JobSpec {
  const fromModel = e.params === null ? {} : parseOptions(e.params)
  const o: RequestOptions = { ...(isApiError(fromModel) ? {} : fromModel), ...r.options }
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
  const want = o.numCtx ?? env.conf.numCtx
  return {
    kind,
    model: r.model,
    modelPath: e.path,
    numCtx: Math.max(16, modelCtx > 0 ? Math.min(want, modelCtx) : want),
    stream: r.stream,
    prompt: r.prompt,
    system: r.system ?? e.system,
    raw: r.raw,
    context: r.context,
    messages: r.messages,
    format: r.format,
    sampling,
    numPredict: o.numPredict !== undefined && o.numPredict > 0 ? o.numPredict : env.conf.maxNumPredict > 0 ? env.conf.maxNumPredict : -1,
    stop: o.stop ?? [],
    returnContext: r.endpoint === 'generate' && !r.raw,
    truncate: r.truncate,
  }
}

/**
 * The per-request limits the API process can check before any model work: prompt bytes and
 * num_predict (the token limit needs the tokenizer: the runner applies it, tokenizing only the end).
 */
function overLimit (conf: GenerationConf, r: GenRequest): { status: number, message: string } | null {
  if (conf.maxPromptBytes > 0) {
    let size = Buffer.byteLength(r.prompt) + (r.system === null ? 0 : Buffer.byteLength(r.system))
    for (const m of r.messages ?? []) size += Buffer.byteLength(m.content)
    if (size > conf.maxPromptBytes) {
      return { status: ERRORS.LB_ERR_GEN_PROMPT_TOO_LARGE.status, message: formatError('LB_ERR_GEN_PROMPT_TOO_LARGE', { size, limit: conf.maxPromptBytes }) }
    }
  }
  const n = r.options.numPredict
  if (conf.maxNumPredict > 0 && n !== undefined && n > conf.maxNumPredict) {
    return { status: ERRORS.LB_ERR_GEN_NUM_PREDICT.status, message: formatError('LB_ERR_GEN_NUM_PREDICT', { value: n, limit: conf.maxNumPredict }) }
  }
  return null
}

/** Replies `done_reason` load/unload without generating (empty prompt or no messages). */
function loadReply (res: ServerResponse, r: GenRequest, reason: 'load' | 'unload'): number {
  const o: Record<string, unknown> = { model: r.displayModel, created_at: nowIso() }
  if (r.endpoint === 'chat') o.message = { role: 'assistant', content: '' }
  else o.response = ''
  o.done = true
  o.done_reason = reason
  return json(res, 200, o)
}

async function generation (env: RouteEnv, req: IncomingMessage, res: ServerResponse, r: GenRequest | { status: number, message: string }): Promise<number> {
  if (isApiError(r)) return error(res, r.status, r.message)
  const over = overLimit(env.conf, r)
  if (over !== null) return error(res, over.status, over.message)
  const e = r.model === '' ? null : await env.catalog.lookup(r.model)
  if (e === null) return error(res, 404, `model '${r.displayModel}' not found`)
  const empty = r.endpoint === 'chat' ? r.messages!.length === 0 : r.prompt === '' && r.system === null && r.context === null
  const keepAliveMs = r.keepAliveMs ?? env.conf.keepAliveMs
  if (empty && keepAliveMs === 0) {
    env.scheduler.unload(r.model)
    return loadReply(res, r, 'unload')
  }
  const info = await env.catalog.info(e).catch(() => null)
  const spec = buildJob(env, r, e, info === null ? 0 : contextLength(info), empty ? 'load' : r.endpoint)
  const started = process.hrtime.bigint()
  const writer = new ReplyWriter(r.endpoint === 'chat', r.stream, r.displayModel)
  const endpoint: GenEndpoint = r.endpoint
  let finished = false
  let timer: NodeJS.Timeout | null = null
  const end = (outcome: GenOutcome): void => {
    finished = true
    if (timer !== null) clearTimeout(timer)
    env.requests[endpoint][outcome]++
  }
  const sink: JobSink = {
    pieces (texts, ts) { writer.pieces(res, texts, ts) },
    done (result: JobResult) {
      end('ok')
      if (result.truncated) env.log.warn('truncating input prompt', { model: r.model, kept: result.promptTokens })
      if (spec.kind === 'load') loadReply(res, r, 'load')
      else writer.done(res, result, Number(process.hrtime.bigint() - started))
    },
    fail (status, message) {
      end(outcomeOf(status))
      writer.fail(res, status, message)
    },
  }
  const id = env.scheduler.submit(spec, keepAliveMs, e.size, sink)
  if (id === 0) {
    end('busy')
    error(res, 503, BUSY_MESSAGE)
    return 0
  }
  const gone = (): void => {
    if (finished) return
    end('cancelled')
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
      env.scheduler.cancel(id, env.conf.cancelGraceMs)
      writer.fail(res, ERRORS.LB_ERR_GEN_TIMEOUT.status, formatError('LB_ERR_GEN_TIMEOUT', { seconds: limit / 1000 }))
    }, limit)
  }
  return 0
}
