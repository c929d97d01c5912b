// OpenAI's `tools` and `tool_choice`, honoured by grammar on any local model:
// - none: the tools are not shown to the model and no call is made;
// - auto: the tools are described in a system message; the reply is either
//   text that does not start with "{", or a call: once the model writes "{",
//   the grammar holds it to a call of one of the tools with arguments that
//   match that tool's parameters (GenRequest.formatOptional);
// - required / a named function: the reply is such a call (of that function).
// A call is the JSON object {"name": <tool>, "arguments": <object>}; its
// arguments are enforced, and cut replies completed, exactly as `format` is
// (structured/, local/runner/format-budget.ts). One call per reply.

import { randomBytes } from 'node:crypto'
import type { ApiError } from '../dispatch/request.js'
import type { ChatMessage } from '../local/protocol.js'
import { checkSchema, type Schema } from '../structured/schema.js'

export interface Tool { name: string, description: string, parameters: Schema }
export type ToolChoice = 'none' | 'auto' | 'required' | { name: string }

export interface ToolPlan {
  tools: Tool[]
  choice: ToolChoice
  /** The grammar of a call (null when no call may be made). */
  format: Schema | null
}

/** The shape of a call in OpenAI's reply. */
export interface ToolCall { id: string, type: 'function', function: { name: string, arguments: string } }

const NAME = /^[a-zA-Z0-9_-]{1,64}$/
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
const bad = (param: string, message: string): ApiError => ({ status: 400, message: `invalid value for "${param}": ${message}`, param })

/** A tool's $defs moved to the root under names of their own, so that every tool's $refs still resolve inside the call schema. */
function hoist (s: unknown, prefix: string, defs: Record<string, unknown>): unknown {
  if (Array.isArray(s)) return s.map((x) => hoist(x, prefix, defs))
  if (!isObj(s)) return s
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(s)) {
    if (k === '$defs' && isObj(v)) for (const [n, d] of Object.entries(v)) defs[prefix + n] = hoist(d, prefix, defs)
    else if (k === '$ref' && typeof v === 'string') out.$ref = `#/$defs/${prefix}${v.slice(v.lastIndexOf('/') + 1)}`
    else if (k === 'properties' && isObj(v)) out.properties = Object.fromEntries(Object.entries(v).map(([n, x]) => [n, hoist(x, prefix, defs)]))
    else out[k] = hoist(v, prefix, defs)
  }
  return out
}

function callSchema (tools: readonly Tool[]): Schema {
  const defs: Record<string, unknown> = {}
  const branches = tools.map((t, i) => ({
    type: 'object',
    properties: { name: { const: t.name }, arguments: hoist(t.parameters, `t${i}_`, defs) },
    required: ['name', 'arguments'],
    additionalProperties: false,
  }))
  const root: Record<string, unknown> = branches.length === 1 ? branches[0]! : { oneOf: branches }
  if (Object.keys(defs).length > 0) root.$defs = defs
  return root as Schema
}

/** `tools` and `tool_choice` of a chat request; null when it has neither. */
export function parseTools (body: Record<string, unknown>): ToolPlan | ApiError | null {
  const raw = body.tools
  const rawChoice = body.tool_choice
  if ((raw === undefined || raw === null) && (rawChoice === undefined || rawChoice === null)) return null
  const tools: Tool[] = []
  if (raw !== undefined && raw !== null) {
    if (!Array.isArray(raw)) return bad('tools', 'expected an array of tools')
    if (raw.length > 128) return bad('tools', `at most 128 tools, found ${raw.length}`)
    for (let i = 0; i < raw.length; i++) {
      const t = raw[i] as unknown
      const at = `tools[${i}]`
      if (!isObj(t) || t.type !== 'function' || !isObj(t.function)) return bad(at, 'expected {"type": "function", "function": {...}} (only function tools are supported)')
      const f = t.function
      if (typeof f.name !== 'string' || !NAME.test(f.name)) return bad(`${at}.function.name`, 'expected 1 to 64 letters, digits, "_" or "-"')
      if (tools.some((x) => x.name === f.name)) return bad(`${at}.function.name`, `"${f.name}" is defined twice`)
      if (f.description !== undefined && f.description !== null && typeof f.description !== 'string') return bad(`${at}.function.description`, 'expected a string')
      const params = f.parameters ?? { type: 'object', properties: {}, additionalProperties: false }
      if (!isObj(params)) return bad(`${at}.function.parameters`, 'expected a JSON Schema object')
      const checked = checkSchema(params as Schema, `${at}.function.parameters`)
      if ('error' in checked) return { status: 400, message: checked.error, param: `${at}.function.parameters` }
      tools.push({ name: f.name, description: typeof f.description === 'string' ? f.description : '', parameters: checked.schema })
    }
  }
  let choice: ToolChoice = tools.length > 0 ? 'auto' : 'none'
  if (rawChoice !== undefined && rawChoice !== null) {
    if (rawChoice === 'none' || rawChoice === 'auto' || rawChoice === 'required') choice = rawChoice
    else if (isObj(rawChoice) && rawChoice.type === 'function' && isObj(rawChoice.function) && typeof rawChoice.function.name === 'string') choice = { name: rawChoice.function.name }
    else return bad('tool_choice', 'expected "none", "auto", "required" or {"type": "function", "function": {"name": ...}}')
  }
  if (choice !== 'none' && tools.length === 0) return bad('tool_choice', '"tool_choice" is only allowed when "tools" are specified')
  let callable = tools
  if (typeof choice === 'object') {
    const name = choice.name
    callable = tools.filter((t) => t.name === name)
    if (callable.length === 0) return bad('tool_choice', `no tool named "${name}" in "tools"`)
  }
  return { tools, choice, format: choice === 'none' ? null : callSchema(callable) }
}

/** What the model is told: the tools, and how to call one (it is held to that shape by grammar anyway). */
export function toolInstructions (plan: ToolPlan): string {
  const how = '{"name": <tool name>, "arguments": <the arguments object>}'
  const head = plan.choice === 'auto'
    ? `You can call a tool. To call one, reply with only the JSON object ${how}; otherwise reply in plain text.`
    : typeof plan.choice === 'object'
      ? `Call the tool ${plan.choice.name}: reply with only the JSON object ${how}.`
      : `Call one of these tools: reply with only the JSON object ${how}.`
  const lines = plan.tools.map((t) => JSON.stringify({ name: t.name, description: t.description, parameters: t.parameters }))
  return `${head}\nTools:\n${lines.join('\n')}`
}

/** The messages with the tool instructions as (the end of) the first system message. */
export function withInstructions (messages: ChatMessage[], plan: ToolPlan): ChatMessage[] {
  const text = toolInstructions(plan)
  const first = messages[0]
  if (first !== undefined && first.role === 'system') return [{ role: 'system', content: `${first.content}\n\n${text}` }, ...messages.slice(1)]
  return [{ role: 'system', content: text }, ...messages]
}

/** A reply of the model as a tool call, or null when it is text (auto) or names no tool of the plan. */
export function decodeCall (text: string, plan: ToolPlan): ToolCall | null {
  if (plan.format === null || !text.startsWith('{')) return null
  let v: unknown
  try { v = JSON.parse(text) } catch { return null }
  if (!isObj(v) || typeof v.name !== 'string' || !plan.tools.some((t) => t.name === v.name)) return null
  return { id: `call_${randomBytes(12).toString('hex')}`, type: 'function', function: { name: v.name, arguments: JSON.stringify(v.arguments ?? {}) } }
}

/** An assistant turn that made calls, as the model would have written them (one call per line). */
export function callsAsText (calls: ReadonlyArray<{ name: string, arguments: unknown }>): string {
  return calls.map((c) => JSON.stringify({ name: c.name, arguments: c.arguments })).join('\n')
}
