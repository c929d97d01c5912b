// Embeddings from one remote model server: Ollama's /api/embed (or the legacy
// /api/embeddings, whose vector is not normalised) for ollama and lb kinds,
// OpenAI's /v1/embeddings for the openai kind (whose vectors come normalised).
// The vectors come back as the server made them; dispatch/embedding.ts cuts
// and scales them as the request asked, as it does the local runner's.

import { request } from 'undici'
import type { ApiError, EmbedRequest } from '../dispatch/request.js'
import { formatError } from '../../errors.js'
import type { CallEnd } from './client.js'
import { ollamaErrorMessage } from './ollama-wire.js'
import { openaiErrorOf } from './openai-wire.js'
import type { RemoteServer } from './server.js'

/** Bytes of an embeddings reply read at most: 2,048 inputs of 4,096 dimensions as JSON text fit. */
const MAX_REPLY = 256 << 20

export interface Embedded { vectors: number[][], promptTokens: number }

const isVector = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => typeof x === 'number')

function failed (error: ApiError, retry: boolean, down: boolean, missing = false): CallEnd {
  return { ok: false, error, delivered: false, retry, down, missing }
}

/** Asks `server` for the vectors of `r.inputs`; `got` receives them when the call succeeds. */
export async function embedCall (server: RemoteServer, served: string, r: EmbedRequest, signal: AbortSignal, got: (e: Embedded) => void): Promise<CallEnd> {
  const name = server.conf.name
  const openai = server.conf.kind === 'openai'
  const legacy = !openai && !r.normalize
  const path = openai ? '/v1/embeddings' : legacy ? '/api/embeddings' : '/api/embed'
  const body: Record<string, unknown> = openai
    ? { model: served, input: r.inputs, encoding_format: 'float' }
    : legacy ? { model: served, prompt: r.inputs[0] ?? '' } : { model: served, input: r.inputs, truncate: r.truncate }
  if (!openai && r.numCtx !== null) body.options = { num_ctx: r.numCtx }
  if (!openai && r.keepAliveMs !== null) body.keep_alive = r.keepAliveMs < 0 ? -1 : `${r.keepAliveMs}ms`
  const upstream = (reason: string): ApiError => ({ status: 502, message: formatError('LB_ERR_GEN_UPSTREAM', { server: name, reason }), code: 'LB_ERR_GEN_UPSTREAM' })
  let text: string
  let status: number
  try {
    const res = await request(server.conf.url + path, { method: 'POST', headers: server.headers(), body: JSON.stringify(body), signal, headersTimeout: 0, bodyTimeout: 0 })
    status = res.statusCode
    const chunks: Buffer[] = []
    let size = 0
    for await (const c of res.body as AsyncIterable<Buffer>) {
      size += c.length
      if (size > MAX_REPLY) throw new Error(`a reply larger than ${MAX_REPLY} bytes`)
      chunks.push(c)
    }
    text = Buffer.concat(chunks).toString('utf8')
  } catch (e) {
    if (signal.aborted) return failed({ status: 499, message: 'client gone' }, false, false)
    return failed(upstream((e as Error).message), true, true)
  }
  if (status !== 200) {
    const detail = openai ? openaiErrorOf(text) : { message: ollamaErrorMessage(text) }
    if (status === 404) return failed({ status: 404, message: detail.message, param: 'model', code: 'model_not_found' }, true, false, true)
    if (status === 408 || status === 429 || status >= 500) return failed(upstream(`HTTP ${status}: ${detail.message}`), true, status >= 500 && status !== 503)
    return failed({ status, message: detail.message, param: 'param' in detail ? detail.param : null, code: 'code' in detail ? detail.code : null }, false, false)
  }
  let o: Record<string, unknown>
  try { o = JSON.parse(text) as Record<string, unknown> } catch { return failed(upstream('a reply that is not JSON'), true, true) }
  let vectors: unknown[] = []
  let promptTokens = 0
  if (openai) {
    const data = Array.isArray(o.data) ? o.data as Array<{ embedding?: unknown, index?: unknown }> : []
    vectors = [...data].sort((a, b) => Number(a.index ?? 0) - Number(b.index ?? 0)).map((d) => d.embedding)
    const u = o.usage as { prompt_tokens?: unknown } | undefined
    promptTokens = typeof u?.prompt_tokens === 'number' ? u.prompt_tokens : 0
  } else {
    vectors = legacy ? [o.embedding] : Array.isArray(o.embeddings) ? o.embeddings : []
    promptTokens = typeof o.prompt_eval_count === 'number' ? o.prompt_eval_count : 0
  }
  if (vectors.length !== r.inputs.length || !vectors.every(isVector)) {
    return failed(upstream(`a reply without one vector per input (${r.inputs.length})`), true, true)
  }
  got({ vectors: vectors as number[][], promptTokens })
  return { ok: true }
}
