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
import type { JobSpec } from './protocol.js'
import { linearTokenizer, tailTokens } from './tokens.js'

export interface Input {
  tokens: Token[]
  stops: Array<string | LlamaText>
  /** The start of the input was dropped to fit `limit`. */
  cut: boolean
}

function history (job: JobSpec, fit: (text: string) => string): ChatHistoryItem[] {
  const items: ChatHistoryItem[] = []
  const msgs = job.messages ?? [{ role: 'user' as const, content: job.prompt }]
  if (job.system !== null && !msgs.some((m) => m.role === 'system')) items.push({ type: 'system', text: fit(job.system) })
  for (const m of msgs) {
    const text = fit(m.content)
    switch (m.role) {
      case 'system': items.push({ type: 'system', text }); break
      case 'assistant': items.push({ type: 'model', response: [text] }); break
      // Tool results are shown to the model as user turns (tools themselves are refused by the API).
      case 'user': case 'tool': items.push({ type: 'user', text }); break
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
    // Each text is first cut to its last `limit` tokens: more could not be kept anyway.
    const fit = (text: string): string => {
      const tail = tailTokens(model, text, limit)
      if (!tail.cut) return text
      cut = true
      return model.detokenize(tail.tokens)
    }
    const state = h.chatWrapper.generateContextState({ chatHistory: history(job, fit) })
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
