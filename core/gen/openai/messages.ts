// OpenAI chat messages -> the chat turns the model's template formats.
// Roles: system and developer (a system turn), user, assistant, tool (a tool's
// result, shown to the model as a user turn). Content: a string, or text parts
// (joined by line ends); images, audio and files are refused (the local
// models read text). An assistant turn's tool_calls become the JSON calls the
// model would have written (openai/tools.ts), so a conversation reads as the
// model is asked to answer.

import { describe } from '../../config/check.js'
import type { ApiError } from '../dispatch/request.js'
import type { ChatMessage } from '../local/protocol.js'
import { callsAsText } from './tools.js'

const ROLES: Record<string, ChatMessage['role']> = { system: 'system', developer: 'system', user: 'user', assistant: 'assistant', tool: 'tool' }
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
const bad = (param: string, expected: string, found: unknown): ApiError =>
  ({ status: 400, message: `invalid value for "${param}": expected ${expected}, found ${describe(found)}`, param })

function content (v: unknown, at: string, role: string): string | ApiError {
  if (typeof v === 'string') return v
  if ((v === null || v === undefined) && role === 'assistant') return ''
  if (!Array.isArray(v)) return bad(`${at}.content`, 'a string or an array of content parts', v)
  const texts: string[] = []
  for (let j = 0; j < v.length; j++) {
    const p = v[j] as unknown
    const pat = `${at}.content[${j}]`
    if (!isObj(p) || typeof p.type !== 'string') return bad(pat, 'a content part {"type": "text", "text": ...}', p)
    if (p.type !== 'text' && p.type !== 'refusal') return { status: 400, message: `content parts of type "${p.type}" are not supported: the local models read text`, param: `${pat}.type` }
    const text = p.type === 'text' ? p.text : p.refusal
    if (typeof text !== 'string') return bad(`${pat}.${p.type}`, 'a string', text)
    texts.push(text)
  }
  return texts.join('\n')
}

function toolCalls (v: unknown, at: string): Array<{ name: string, arguments: unknown }> | ApiError {
  if (!Array.isArray(v)) return bad(`${at}.tool_calls`, 'an array of tool calls', v)
  const out: Array<{ name: string, arguments: unknown }> = []
  for (let j = 0; j < v.length; j++) {
    const c = v[j] as unknown
    const cat = `${at}.tool_calls[${j}]`
    if (!isObj(c) || !isObj(c.function) || typeof c.function.name !== 'string') return bad(cat, '{"type": "function", "function": {"name", "arguments"}}', c)
    const a = c.function.arguments ?? '{}'
    if (typeof a !== 'string') return bad(`${cat}.function.arguments`, 'a JSON text', a)
    let args: unknown
    try { args = JSON.parse(a) } catch { return bad(`${cat}.function.arguments`, 'a JSON text', a) }
    out.push({ name: c.function.name, arguments: args })
  }
  return out
}

export function parseMessages (raw: unknown): ChatMessage[] | ApiError {
  if (raw === undefined || raw === null) return { status: 400, message: 'missing required parameter: "messages"', param: 'messages' }
  if (!Array.isArray(raw)) return bad('messages', 'an array of messages', raw)
  if (raw.length === 0) return { status: 400, message: 'invalid value for "messages": expected at least one message, found []', param: 'messages' }
  const out: ChatMessage[] = []
  for (let i = 0; i < raw.length; i++) {
    const m = raw[i] as unknown
    const at = `messages[${i}]`
    if (!isObj(m)) return bad(at, 'an object with "role" and "content"', m)
    const role = typeof m.role === 'string' && Object.hasOwn(ROLES, m.role) ? ROLES[m.role]! : null
    if (role === null) return bad(`${at}.role`, 'one of "system", "developer", "user", "assistant", "tool"', m.role)
    let text = content(m.content, at, role)
    if (typeof text !== 'string') return text
    if (role === 'assistant' && m.tool_calls !== undefined && m.tool_calls !== null) {
      const calls = toolCalls(m.tool_calls, at)
      if (!Array.isArray(calls)) return calls
      text = text === '' ? callsAsText(calls) : `${text}\n${callsAsText(calls)}`
    }
    out.push({ role, content: text })
  }
  return out
}
