// Job -> the tokens to evaluate and the extra stop triggers.
//
// /api/chat always goes through the model's chat wrapper (node-llama-cpp picks
// it from the GGUF's chat template, or a general "### Human / ### Assistant"
// format when there is none). /api/generate does too when the model has a chat
// template and the request is not raw: the prompt becomes one user message,
// as Ollama's default template does. Otherwise the text is fed as is, with the
// system prompt (if any) as a first paragraph.
//
// The returned tokens never start with BOS: LlamaCompletion prepends it.
//
// Length: the input is at most `limit` tokens; a longer one keeps its end (as
// Ollama truncates: the most recent text matters most) and says so (`cut`).
// Each text is tokenized only as far back from its end as the limit can use
// (tokens.ts), so a megabyte prompt costs no more than one that fills the
// context, and every tokenization is linear in its length.

import type { ChatHistoryItem, LlamaText, Token } from 'node-llama-cpp'
import type { Hosted } from './model-host.js'
import type { ChatMessage, JobSpec } from '../protocol.js'
import { linearTokenizer, tailTokens } from './tokens.js'

export interface Input {
  tokens: Token[]
  stops: Array<string | LlamaText>
  /** The start of the input was dropped to fit `limit`. */
  cut: boolean
}

/**
 * The messages that can still be (partly) kept, each cut to its last `limit` tokens: walking from
 * the newest, once the messages seen hold more than `limit` tokens (each counts at least one: its
 * template adds some), every older one, and the system prompt before them, would be cut anyway.
 * So a request of many messages costs what `limit` tokens cost, not what it sent.
 */
function recent (model: Hosted['model'], job: JobSpec, limit: number): { msgs: ChatMessage[], system: string | null, cut: boolean } {
  const all = job.messages ?? [{ role: 'user' as const, content: job.prompt }]
  const fit = (text: string): { text: string, n: number, cut: boolean } => {
    const tail = tailTokens(model, text, limit)
    return { text: tail.cut ? model.detokenize(tail.tokens) : text, n: Math.max(1, tail.tokens.length), cut: tail.cut }
  }
  const msgs: ChatMessage[] = []
  let seen = 0
  let cut = false
  let i = all.length
  while (i > 0 && seen <= limit) {
    const m = all[--i]!
    const f = fit(m.content)
    msgs.push({ role: m.role, content: f.text })
    seen += f.n
    cut ||= f.cut
  }
  msgs.reverse()
  let system: string | null = null
  if (job.system !== null && !all.some((m) => m.role === 'system')) {
    if (i === 0 && seen <= limit) {
      const f = fit(job.system)
      system = f.text
      cut ||= f.cut
    } else {
      cut = true
    }
  }
  return { msgs, system, cut: cut || i > 0 }
}

function history (msgs: readonly ChatMessage[], system: string | null): ChatHistoryItem[] {
  const items: ChatHistoryItem[] = []
  if (system !== null) items.push({ type: 'system', text: system })
  for (const m of msgs) {
    switch (m.role) {
      case 'system': items.push({ type: 'system', text: m.content }); break
      case 'assistant': items.push({ type: 'model', response: [m.content] }); break
      // Tool results are shown to the model as user turns (tools themselves are refused by the API).
      case 'user': case 'tool': items.push({ type: 'user', text: m.content }); break
      default: { const never: never = m.role; throw new Error(`unknown role ${String(never)}`) }
    }
  }
  items.push({ type: 'model', response: [] })
  return items
}

/** The input of `job`, at most `limit` tokens (its end). */
export function buildInput (h: Hosted, job: JobSpec, limit: number): Input {
  const model = h.model
  let tokens: Token[]
  let stops: Array<string | LlamaText> = job.stop
  let cut = false
  if (job.kind === 'chat' || (!job.raw && h.hasTemplate)) {
    const r = recent(model, job, limit)
    cut = r.cut
    const state = h.chatWrapper.generateContextState({ chatHistory: history(r.msgs, r.system) })
    tokens = state.contextText.tokenize(linearTokenizer(model))
    if (tokens.length > 0 && tokens[0] === model.tokens.bos) tokens = tokens.slice(1)
    stops = [...job.stop, ...state.stopGenerationTriggers]
  } else {
    const tail = tailTokens(model, job.system !== null ? `${job.system}\n\n${job.prompt}` : job.prompt, limit)
    tokens = tail.tokens
    cut = tail.cut
  }
  if (job.context !== null) tokens = [...job.context as Token[], ...tokens]
  if (tokens.length > limit) {
    tokens = tokens.slice(tokens.length - limit)
    cut = true
  }
  return { tokens, stops, cut }
}
