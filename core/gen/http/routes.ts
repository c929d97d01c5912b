// The HTTP surface of both client APIs: one route table (method, path, the
// API it speaks, handler). A handler turns its API's body into a request
// (ollama/, openai/), hands it to the one code path that serves it
// (dispatch/), with the writer that puts the result in its API's shape.
// Every refusal here (unknown path, body too large, bad JSON) is in the
// route's API shape too: OpenAI's error body under /v1/, Ollama's elsewhere.

import type { IncomingMessage, ServerResponse } from 'node:http'
import { apiOfPath, type ApiShape } from '../../api-errors.js'
import { type Consumer, mayUse } from '../budget/consumer.js'
import { embedding } from '../dispatch/embedding.js'
import { allowed, type GenEnv, generation, modelNotFound } from '../dispatch/generation.js'
import { markArrival } from '../dispatch/model-usage.js'
import type { ApiError } from '../dispatch/request.js'
import { parseModelName } from '../models/names.js'
import { ollamaEmbedWriter } from '../ollama/embed.js'
import { OLLAMA_VERSION, ps, show, tags } from '../ollama/info.js'
import { OllamaWriter } from '../ollama/reply.js'
import { isApiError, parseChat, parseEmbed, parseGenerate } from '../ollama/request.js'
import { openaiEmbedWriter, parseEmbeddings } from '../openai/embeddings.js'
import { modelList, modelObject } from '../openai/models.js'
import { OpenAiWriter } from '../openai/reply.js'
import { parseChatCompletion, parseCompletion } from '../openai/request.js'
import { openaiEntry, remoteOpenAiModels, remotePs, remoteShow, remoteTags } from '../remote/listing.js'
import { outcomeOf, type GenEndpoint, type GenOutcome } from '../stats.js'
import { sendError, sendJson, sendText } from './respond.js'

const MAX_BODY = 16 << 20
/** The consumer of an open route (health, version) asked without a valid key: it runs no model. */
const ANONYMOUS: Consumer = { id: '', label: 'other', limits: { rpm: 0, tpm: 0, tpd: 0, maxInFlight: 0 }, allows: () => false }

/**
 * Returns the status answered at once (counted by the caller), or 0 when the request counts its own end.
 * `who`: the consumer the request is charged to (core/gen/budget/consumer.ts).
 */
type Handler = (env: GenEnv, req: IncomingMessage, res: ServerResponse, body: unknown, param: string, who: Consumer) => Promise<number>
interface Route {
  method: 'GET' | 'POST'
  /** The path, or its start when `prefix` (the rest is the route's parameter, e.g. a model id). */
  path: string
  prefix: boolean
  api: 'ollama' | 'openai'
  endpoint: GenEndpoint
  body: boolean
  /** Answered without a key even when keys are required: liveness and version probes, which say nothing of models. */
  open: boolean
  handler: Handler
}

const json = (res: ServerResponse, status: number, o: unknown): number => {
  sendJson(res, status, JSON.stringify(o))
  return status
}
const fail = (res: ServerResponse, api: ApiShape, e: ApiError): number => {
  sendError(res, api, e)
  return e.status
}
const text = (t: string): Handler => async (_e, _q, res) => { sendText(res, 200, t); return 200 }

async function showHandler (env: GenEnv, _q: IncomingMessage, res: ServerResponse, body: unknown, _p: string, who: Consumer): Promise<number> {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
  const raw = typeof b.model === 'string' ? b.model : typeof b.name === 'string' ? b.name : ''
  if (raw === '') return fail(res, 'ollama', { status: 400, message: 'model is required' })
  const name = parseModelName(raw)
  const served = name === null || !allowed(env, who, name) ? null : env.remote.resolve(name)
  const e = served === null ? null : await env.catalog.lookup(served)
  if (e !== null) return json(res, 200, await show(env.catalog, e))
  await env.remote.ready()
  const r = served === null ? null : env.remote.find(served)
  if (r === null) return fail(res, 'ollama', modelNotFound(raw))
  return json(res, 200, await remoteShow(r.server, r.model))
}

async function retrieveModel (env: GenEnv, _q: IncomingMessage, res: ServerResponse, _b: unknown, id: string, who: Consumer): Promise<number> {
  let raw: string
  try { raw = decodeURIComponent(id) } catch { raw = id }
  const name = parseModelName(raw)
  const served = name === null || !allowed(env, who, name) ? null : env.remote.resolve(name)
  const e = served === null ? null : await env.catalog.lookup(served)
  if (e !== null) return json(res, 200, modelObject(e))
  await env.remote.ready()
  const r = served === null ? null : env.remote.find(served)
  if (r === null) return fail(res, 'openai', { ...modelNotFound(raw), message: `The model '${raw}' does not exist` })
  return json(res, 200, openaiEntry(r.server, r.model, raw))
}

/** The canonical names of the local models, listed before the remote ones. */
const localNames = (list: ReadonlyArray<{ name?: unknown, id?: unknown }>): Set<string> =>
  new Set(list.map((m) => parseModelName(String(m.name ?? m.id))).filter((n): n is string => n !== null))

/** The models `who` may see in a list, by the name or id a list entry has. */
const visible = (who: Consumer) => (model: string): boolean => mayUse(who, parseModelName(model) ?? model)
const seen = <T extends { name?: unknown, id?: unknown }>(who: Consumer, list: T[]): T[] => list.filter((m) => visible(who)(String(m.name ?? m.id)))

async function tagsHandler (env: GenEnv, _q: IncomingMessage, res: ServerResponse, _b: unknown, _p: string, who: Consumer): Promise<number> {
  const local = await tags(env.catalog, visible(who)) as { models: Array<{ name: string }> }
  await env.remote.ready()
  return json(res, 200, { models: [...local.models, ...seen(who, remoteTags(env.remote, localNames(local.models)))] })
}

async function psHandler (env: GenEnv, _q: IncomingMessage, res: ServerResponse, _b: unknown, _p: string, who: Consumer): Promise<number> {
  const local = await ps(env.catalog, env.scheduler.loaded(), visible(who)) as { models: Array<{ name: string }> }
  return json(res, 200, { models: [...local.models, ...seen(who, remotePs(env.remote, localNames(local.models)))] })
}

async function modelsHandler (env: GenEnv, _q: IncomingMessage, res: ServerResponse, _b: unknown, _p: string, who: Consumer): Promise<number> {
  const local = modelList((await env.catalog.list()).filter((e) => mayUse(who, e.name))) as { object: string, data: Array<{ id: string }> }
  await env.remote.ready()
  return json(res, 200, { object: 'list', data: [...local.data, ...seen(who, remoteOpenAiModels(env.remote, localNames(local.data)))] })
}

const route = (method: Route['method'], path: string, endpoint: GenEndpoint, handler: Handler, prefix = false): Route =>
  ({ method, path, prefix, api: apiOfPath(path), endpoint, body: method === 'POST', open: endpoint === 'other' || endpoint === 'version', handler })

export const ROUTES: readonly Route[] = [
  route('GET', '/', 'other', text('Ollama is running')),
  route('GET', '/health', 'other', text('ok')),
  route('GET', '/api/health', 'other', text('ok')),
  route('GET', '/api/version', 'version', async (_e, _q, res) => json(res, 200, { version: OLLAMA_VERSION })),
  route('GET', '/api/tags', 'tags', tagsHandler),
  route('GET', '/api/ps', 'ps', psHandler),
  route('POST', '/api/show', 'show', showHandler),
  route('POST', '/api/generate', 'generate', (env, q, res, b, _p, who) => {
    const r = parseGenerate(b)
    return generation(env, q, res, r, new OllamaWriter(res, false, !isApiError(r) && r.stream, isApiError(r) ? '' : r.displayModel), who)
  }),
  route('POST', '/api/chat', 'chat', (env, q, res, b, _p, who) => {
    const r = parseChat(b)
    return generation(env, q, res, r, new OllamaWriter(res, true, !isApiError(r) && r.stream, isApiError(r) ? '' : r.displayModel), who)
  }),
  route('POST', '/api/embed', 'embed', (env, q, res, b, _p, who) => {
    const r = parseEmbed(b, false)
    return embedding(env, q, res, r, ollamaEmbedWriter(res, isApiError(r) ? '' : r.displayModel, false), who)
  }),
  route('POST', '/api/embeddings', 'embed', (env, q, res, b, _p, who) => embedding(env, q, res, parseEmbed(b, true), ollamaEmbedWriter(res, '', true), who)),
  route('GET', '/v1/models', 'tags', modelsHandler),
  route('GET', '/v1/models/', 'show', retrieveModel, true),
  route('POST', '/v1/chat/completions', 'chat', (env, q, res, b, _p, who) => {
    const r = parseChatCompletion(b)
    if (isApiError(r)) return Promise.resolve(fail(res, 'openai', r))
    return generation(env, q, res, r.gen, new OpenAiWriter(res, true, r), who)
  }),
  route('POST', '/v1/completions', 'generate', (env, q, res, b, _p, who) => {
    const r = parseCompletion(b)
    if (isApiError(r)) return Promise.resolve(fail(res, 'openai', r))
    return generation(env, q, res, r.gen, new OpenAiWriter(res, false, r), who)
  }),
  route('POST', '/v1/embeddings', 'embed', (env, q, res, b, _p, who) => {
    const r = parseEmbeddings(b)
    if (isApiError(r)) return Promise.resolve(fail(res, 'openai', r))
    return embedding(env, q, res, r.embed, openaiEmbedWriter(res, r), who)
  }),
]

/** Reads a JSON body; returns the value or an error already answered (as a status; 499: the client left). */
function readBody (req: IncomingMessage, res: ServerResponse, api: ApiShape): Promise<{ value: unknown } | number> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size > MAX_BODY) {
        req.removeAllListeners('data')
        req.resume()
        resolve(fail(res, api, { status: 413, message: `request body larger than ${MAX_BODY} bytes` }))
      } else {
        chunks.push(c)
      }
    })
    req.on('error', () => resolve(499))
    req.on('end', () => {
      if (size > MAX_BODY) return
      if (size === 0) return resolve(fail(res, api, { status: 400, message: 'missing request body' }))
      try {
        resolve({ value: JSON.parse(Buffer.concat(chunks, size).toString('utf8')) })
      } catch (e) {
        resolve(fail(res, api, { status: 400, message: `invalid JSON: ${(e as Error).message}` }))
      }
    })
  })
}

/** The route of a request, or why there is none (a known path with another method: 405). */
function find (method: string, path: string): Route | 404 | 405 {
  let known = false
  for (const r of ROUTES) {
    if (r.prefix ? !(path.startsWith(r.path) && path.length > r.path.length) : r.path !== path) continue
    known = true
    if (r.method === method) return r
  }
  return known ? 405 : 404
}

/**
 * The API's request listener. `trusted`: requests come over the data plane's unix socket, whose forwarding
 * headers lb itself set (x-real-ip, x-lb-user); false for the TCP listener, where the peer is the client.
 */
export function createHandler (env: GenEnv, trusted: boolean): (req: IncomingMessage, res: ServerResponse) => void {
  const count = (endpoint: GenEndpoint, outcome: GenOutcome): void => { env.requests[endpoint][outcome]++ }
  return (req, res) => {
    markArrival(req)
    const url = req.url ?? '/'
    const q = url.indexOf('?')
    const path = q < 0 ? url : url.slice(0, q)
    const r = find(req.method === 'HEAD' ? 'GET' : req.method ?? '', path)
    if (typeof r === 'number') {
      req.resume()
      // Ollama's router answers in text (gin); OpenAI's API in its error body
      if (apiOfPath(path) === 'openai') fail(res, 'openai', { status: r, message: r === 405 ? `method ${req.method ?? ''} not allowed for ${path}` : `invalid URL (${req.method ?? ''} ${path})` })
      else sendText(res, r, r === 405 ? '405 method not allowed' : '404 page not found')
      count('other', 'client_error')
      return
    }
    // who pays, before the body is read: a request without a valid key costs no more than its headers
    const who = env.budget.identify(req, trusted)
    if (isApiError(who) && !r.open) {
      env.budget.unauthorized()
      req.resume()
      count(r.endpoint, outcomeOf(fail(res, r.api, who)))
      return
    }
    void (async () => {
      let body: unknown = null
      if (r.body) {
        const b = await readBody(req, res, r.api)
        if (typeof b === 'number') return count(r.endpoint, b === 499 ? 'cancelled' : outcomeOf(b))
        body = b.value
      } else {
        req.resume()
      }
      const status = await r.handler(env, req, res, body, r.prefix ? path.slice(r.path.length) : '', isApiError(who) ? ANONYMOUS : who)
      // a job counts its own outcome when it ends (status 0)
      if (status !== 0) count(r.endpoint, status === 499 ? 'cancelled' : outcomeOf(status))
    })().catch((e: Error) => {
      env.log.error('generation API handler failed', { path, err: e.message })
      if (!res.headersSent) sendError(res, r.api, { status: 500, message: `internal error: ${e.message}` })
      else res.destroy()
      count(r.endpoint, 'error')
    })
  }
}
