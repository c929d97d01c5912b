// Ollama's API as lb speaks it to an ollama- or lb-kind server: a request
// becomes /api/generate or /api/chat, always streamed (the first line tells
// that the server took it, and a server dying mid-reply is seen as it
// happens); the NDJSON lines are read into a ReplyState. Options go back
// under Ollama's own names.

import type { GenRequest, RequestOptions } from '../dispatch/request.js'
import { DONE_REASONS, type DoneReason } from '../local/protocol.js'
import { type ReplyState, StreamError } from './reply-state.js'

const OPTION_NAMES: Record<keyof RequestOptions, string> = {
  temperature: 'temperature',
  topK: 'top_k',
  topP: 'top_p',
  minP: 'min_p',
  seed: 'seed',
  numPredict: 'num_predict',
  stop: 'stop',
  numCtx: 'num_ctx',
  repeatPenalty: 'repeat_penalty',
  repeatLastN: 'repeat_last_n',
  presencePenalty: 'presence_penalty',
  frequencyPenalty: 'frequency_penalty',
}

export function ollamaOptions (o: RequestOptions): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(o)) {
    if (v !== undefined && Object.hasOwn(OPTION_NAMES, k)) out[OPTION_NAMES[k as keyof RequestOptions]] = v
  }
  return out
}

/** The path and body asking `served` (the server's own spelling of the model) for `r`. */
export function ollamaCall (r: GenRequest, served: string): { path: string, body: Record<string, unknown> } {
  const body: Record<string, unknown> = { model: served, stream: true }
  if (r.endpoint === 'chat') {
    body.messages = r.messages ?? []
  } else {
    body.prompt = r.prompt
    if (r.system !== null) body.system = r.system
    if (r.raw) body.raw = true
    if (r.context !== null) body.context = r.context
  }
  // a format the reply may ignore (tool_choice "auto") cannot be said in Ollama's API: the reply is left free
  if (r.format !== null && !r.formatOptional) body.format = r.format
  const options = ollamaOptions(r.options)
  if (Object.keys(options).length > 0) body.options = options
  if (r.keepAliveMs !== null) body.keep_alive = r.keepAliveMs < 0 ? -1 : `${r.keepAliveMs}ms`
  if (!r.truncate) body.truncate = false
  return { path: r.endpoint === 'chat' ? '/api/chat' : '/api/generate', body }
}

const num = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : -1

/** One NDJSON line of Ollama's reply into `st`; an error line throws StreamError. */
export function ollamaLine (line: unknown, st: ReplyState): void {
  if (typeof line !== 'object' || line === null) throw new StreamError('a reply line that is not an object')
  const o = line as Record<string, unknown>
  if (typeof o.error === 'string') throw new StreamError(o.error)
  const msg = o.message as { content?: unknown } | undefined
  const text = typeof o.response === 'string' ? o.response : typeof msg?.content === 'string' ? msg.content : ''
  if (o.done !== true) {
    st.text(text)
    return
  }
  st.text(text)
  st.finished = true
  const reason = o.done_reason
  st.doneReason = typeof reason === 'string' && (DONE_REASONS as readonly string[]).includes(reason) ? reason as DoneReason : 'stop'
  st.promptTokens = num(o.prompt_eval_count)
  st.evalTokens = num(o.eval_count)
  st.loadNs = Math.max(0, num(o.load_duration))
  st.promptNs = num(o.prompt_eval_duration)
  st.evalNs = num(o.eval_duration)
  if (Array.isArray(o.context) && o.context.every((t) => Number.isInteger(t))) st.context = o.context as number[]
}

/** The message of an Ollama error body ({"error": "..."}), or the text itself. */
export function ollamaErrorMessage (text: string): string {
  try {
    const o = JSON.parse(text) as { error?: unknown }
    if (typeof o.error === 'string') return o.error
  } catch {}
  return text.trim().slice(0, 500)
}
