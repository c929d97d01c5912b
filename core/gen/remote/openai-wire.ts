// OpenAI's API as lb speaks it to an openai-kind server (llama.cpp's server,
// vLLM, another gateway): a chat request or a templated /api/generate becomes
// /v1/chat/completions, a raw prompt /v1/completions; always streamed, with
// stream_options.include_usage so that the token counts are known (budgets
// count them from the JobResult). Sampling options without an OpenAI name
// (top_k, min_p, repeat_penalty) are sent only when the request set them:
// llama.cpp and vLLM read them, OpenAI itself refuses unknown fields.

import type { ErrorDetail } from '../../api-errors.js'
import type { GenRequest } from '../dispatch/request.js'
import type { ChatMessage } from '../local/protocol.js'
import { type ReplyState, StreamError } from './reply-state.js'

/** The path and body asking `served` for `r`. */
export function openaiCall (r: GenRequest, served: string): { path: string, body: Record<string, unknown> } {
  const body: Record<string, unknown> = { model: served, stream: true, stream_options: { include_usage: true } }
  let path = '/v1/chat/completions'
  if (r.endpoint === 'generate' && r.raw) {
    path = '/v1/completions'
    body.prompt = r.prompt
  } else {
    let messages: ChatMessage[]
    if (r.endpoint === 'chat') messages = r.messages ?? []
    else messages = r.system === null ? [{ role: 'user', content: r.prompt }] : [{ role: 'system', content: r.system }, { role: 'user', content: r.prompt }]
    // a tool's result arrives here as text (openai/messages.ts): a user turn, as the local models are shown it
    body.messages = messages.map((m) => ({ role: m.role === 'tool' ? 'user' : m.role, content: m.content }))
  }
  const o = r.options
  if (o.numPredict !== undefined && o.numPredict > 0) body.max_tokens = o.numPredict
  if (o.temperature !== undefined) body.temperature = o.temperature
  if (o.topP !== undefined) body.top_p = o.topP
  if (o.seed !== undefined) body.seed = o.seed
  if (o.stop !== undefined && o.stop.length > 0) body.stop = o.stop
  if (o.presencePenalty !== undefined) body.presence_penalty = o.presencePenalty
  if (o.frequencyPenalty !== undefined) body.frequency_penalty = o.frequencyPenalty
  if (o.topK !== undefined) body.top_k = o.topK
  if (o.minP !== undefined) body.min_p = o.minP
  if (o.repeatPenalty !== undefined) body.repeat_penalty = o.repeatPenalty
  if (r.format !== null && !r.formatOptional && path !== '/v1/completions') {
    body.response_format = r.format === 'json'
      ? { type: 'json_object' }
      : { type: 'json_schema', json_schema: { name: 'reply', schema: r.format } }
  }
  return { path, body }
}

/** One SSE event's data into `st`; "[DONE]" ends the reply; an error event throws StreamError. */
export function openaiEvent (data: string, st: ReplyState): void {
  if (data === '[DONE]') {
    st.finished = true
    return
  }
  let o: Record<string, unknown>
  try { o = JSON.parse(data) as Record<string, unknown> } catch { throw new StreamError('an event that is not JSON') }
  if (typeof o !== 'object' || o === null) throw new StreamError('an event that is not an object')
  if (o.error !== undefined && o.error !== null) throw new StreamError(errorMessage(o.error))
  const choice = Array.isArray(o.choices) ? o.choices[0] as Record<string, unknown> | undefined : undefined
  if (choice !== undefined && typeof choice === 'object' && choice !== null) {
    const delta = choice.delta as { content?: unknown } | undefined
    const text = typeof choice.text === 'string' ? choice.text : typeof delta?.content === 'string' ? delta.content : ''
    st.text(text)
    if (choice.finish_reason === 'length') st.doneReason = 'length'
  }
  const u = o.usage as { prompt_tokens?: unknown, completion_tokens?: unknown } | null | undefined
  if (typeof u === 'object' && u !== null) {
    if (typeof u.prompt_tokens === 'number' && u.prompt_tokens >= 0) st.promptTokens = u.prompt_tokens
    if (typeof u.completion_tokens === 'number' && u.completion_tokens >= 0) st.evalTokens = u.completion_tokens
  }
}

function errorMessage (e: unknown): string {
  if (typeof e === 'string') return e
  const m = (e as { message?: unknown }).message
  return typeof m === 'string' ? m : JSON.stringify(e).slice(0, 500)
}

/** The message, param and code of an OpenAI error body, or the text itself. */
export function openaiErrorOf (text: string): { message: string } & ErrorDetail {
  try {
    const o = JSON.parse(text) as { error?: unknown }
    if (typeof o.error === 'object' && o.error !== null) {
      const e = o.error as Record<string, unknown>
      return {
        message: errorMessage(e),
        param: typeof e.param === 'string' ? e.param : null,
        code: typeof e.code === 'string' ? e.code : null,
      }
    }
    if (typeof o.error === 'string') return { message: o.error }
  } catch {}
  return { message: text.trim().slice(0, 500) }
}
