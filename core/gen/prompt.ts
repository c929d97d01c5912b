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

import type { ChatHistoryItem, LlamaText, Token } from 'node-llama-cpp'
import type { Hosted } from './model-host.js'
import type { JobSpec } from './protocol.js'

export interface Input {
  tokens: Token[]
  stops: Array<string | LlamaText>
}

function history (job: JobSpec): ChatHistoryItem[] {
  const items: ChatHistoryItem[] = []
  const msgs = job.messages ?? [{ role: 'user' as const, content: job.prompt }]
  if (job.system !== null && !msgs.some((m) => m.role === 'system')) items.push({ type: 'system', text: job.system })
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

export function buildInput (h: Hosted, job: JobSpec): Input {
  const model = h.model
  let tokens: Token[]
  let stops: Array<string | LlamaText> = job.stop
  if (job.kind === 'chat' || (!job.raw && h.hasTemplate)) {
    const state = h.chatWrapper.generateContextState({ chatHistory: history(job) })
    tokens = state.contextText.tokenize(model.tokenizer)
    if (tokens.length > 0 && tokens[0] === model.tokens.bos) tokens = tokens.slice(1)
    stops = [...job.stop, ...state.stopGenerationTriggers]
  } else {
    tokens = model.tokenize(job.system !== null ? `${job.system}\n\n${job.prompt}` : job.prompt)
  }
  if (job.context !== null) tokens = [...job.context as Token[], ...tokens]
  return { tokens, stops }
}
