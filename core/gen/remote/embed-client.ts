// Embeddings from one remote model server: Ollama's /api/embed (or the legacy
// /api/embeddings, whose vector is not normalised) for ollama and lb kinds,
// OpenAI's /v1/embeddings for the openai kind (whose vectors come normalised).
// The vectors come back as the server made them; dispatch/embedding.ts cuts
// and scales them as the request asked, as it does the local runner's.

import type { ApiError, EmbedRequest } from '../dispatch/request.js'
import { type CallEnd, refusal, upstreamError } from './client.js'
import { postForText } from './http-call.js'
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
  const reply = await postForText(server.conf.url, path, server.headers(), JSON.stringify(body), signal, MAX_REPLY)
  if ('failed' in reply) return reply.failed === null ? failed({ status: 499, message: 'client gone' }, false, false) : failed(upstreamError(name, reply.failed), true, true)
  if (reply.status !== 200) {
    const x = refusal(name, openai, reply.status, reply.text)
    return failed(x.error, x.retry, x.down, x.missing)
  }
  let o: Record<string, unknown>
  try { o = JSON.parse(reply.text) as Record<string, unknown> } catch { return failed(upstreamError(name, 'a reply that is not JSON'), true, true) }
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
    return failed(upstreamError(name, `a reply without one vector per input (${r.inputs.length})`), true, true)
  }
  got({ vectors: vectors as number[][], promptTokens })
  return { ok: true }
}
