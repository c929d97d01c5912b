// OpenAI request bodies (/v1/chat/completions, /v1/completions) -> the
// requests dispatch/ serves. Every refusal is a 400 naming the field (OpenAI's
// `param`) and what was wrong; what lb cannot do (n > 1, logprobs, images,
// suffix, echo) is refused rather than silently ignored. Unknown fields are
// ignored, as Ollama's OpenAI layer does.

import { describe } from '../../config/check.js'
import { type ApiError, type GenRequest, isApiError, newGenRequest } from '../dispatch/request.js'
import { parseModelName } from '../models/names.js'
import { checkSchema, type Schema } from '../structured/schema.js'
import { parseMessages } from './messages.js'
import { parseTools, type ToolPlan, withInstructions } from './tools.js'

/** What the OpenAI writer needs besides the job's result. */
export interface OpenAiRequest {
  gen: GenRequest
  /** stream_options.include_usage: a usage chunk (choices: []) before [DONE]. */
  includeUsage: boolean
  tools: ToolPlan | null
}

/** OpenAI's limit on stop sequences. */
const MAX_STOP = 4
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
export const bad = (param: string, expected: string, found: unknown): ApiError =>
  ({ status: 400, message: `invalid value for "${param}": expected ${expected}, found ${describe(found)}`, param })
const unsupported = (param: string, why: string): ApiError => ({ status: 400, message: `"${param}" is not supported: ${why}`, param })
const set = (v: unknown): boolean => v !== undefined && v !== null

function num (b: Record<string, unknown>, key: string, min: number, max: number, int = false): number | undefined | ApiError {
  const v = b[key]
  if (!set(v)) return undefined
  if (typeof v !== 'number' || !Number.isFinite(v) || (int && !Number.isInteger(v)) || v < min || v > max) {
    return bad(key, `${int ? 'an integer' : 'a number'} from ${min} to ${max}`, v)
  }
  return v
}

/** The fields both endpoints share: model, stream, sampling, limits. */
function common (endpoint: 'generate' | 'chat', body: unknown): OpenAiRequest | ApiError {
  if (!isObj(body)) return { status: 400, message: `invalid request: expected a JSON object, found ${describe(body)}` }
  const m = body.model
  if (!set(m) || m === '') return { status: 400, message: 'you must provide a model parameter', param: 'model' }
  if (typeof m !== 'string') return bad('model', 'a string', m)
  const model = parseModelName(m)
  if (model === null) return { status: 400, message: `invalid model name ${JSON.stringify(m)}`, param: 'model' }
  const r = newGenRequest(endpoint, model, m)
  const stream = body.stream ?? false
  if (typeof stream !== 'boolean') return bad('stream', 'true or false', stream)
  r.stream = stream
  let includeUsage = false
  if (set(body.stream_options)) {
    const so = body.stream_options
    if (!stream) return { status: 400, message: 'the "stream_options" parameter is only allowed when "stream" is enabled', param: 'stream_options' }
    if (!isObj(so) || (set(so.include_usage) && typeof so.include_usage !== 'boolean')) return bad('stream_options', '{"include_usage": true or false}', so)
    includeUsage = so.include_usage === true
  }
  const n = num(body, 'n', -Infinity, Infinity, true)
  if (isApiError(n)) return bad('n', 'an integer', body.n)
  if (n !== undefined && n !== 1) return unsupported('n', `one choice is generated per request (n = 1), found ${n}; send the request again for another`)
  const o = r.options
  for (const [key, field, min, max, int] of [
    ['temperature', 'temperature', 0, 2, false], ['top_p', 'topP', 0, 1, false], ['seed', 'seed', -(2 ** 53), 2 ** 53, true],
    ['presence_penalty', 'presencePenalty', -2, 2, false], ['frequency_penalty', 'frequencyPenalty', -2, 2, false],
  ] as const) {
    const v = num(body, key, min, max, int)
    if (isApiError(v)) return v
    if (v !== undefined) o[field] = v
  }
  // max_completion_tokens replaces the older max_tokens; when both are sent, the newer one counts
  for (const key of ['max_tokens', 'max_completion_tokens'] as const) {
    const v = num(body, key, 1, 1e9, true)
    if (isApiError(v)) return v
    if (v !== undefined) { o.numPredict = v; r.numPredictField = key }
  }
  const stop = body.stop
  if (set(stop)) {
    const list = typeof stop === 'string' ? [stop] : stop
    if (!Array.isArray(list) || list.some((s) => typeof s !== 'string')) return bad('stop', 'a string or an array of strings', stop)
    if (list.length > MAX_STOP) return bad('stop', `at most ${MAX_STOP} sequences`, stop)
    o.stop = (list as string[]).filter((s) => s !== '')
  }
  if (set(body.logprobs) && body.logprobs !== false) return unsupported('logprobs', 'log probabilities are not returned')
  if (set(body.top_logprobs) && body.top_logprobs !== 0) return unsupported('top_logprobs', 'log probabilities are not returned')
  if (set(body.logit_bias) && !(isObj(body.logit_bias) && Object.keys(body.logit_bias).length === 0)) return unsupported('logit_bias', 'token ids are those of OpenAI\'s tokenizers, not of the local model')
  if (set(body.reasoning_effort)) return unsupported('reasoning_effort', `"${m}" does not support thinking`)
  return { gen: r, includeUsage, tools: null }
}

function responseFormat (v: unknown): GenRequest['format'] | ApiError {
  if (!set(v)) return null
  if (!isObj(v) || typeof v.type !== 'string') return bad('response_format', '{"type": "text" | "json_object" | "json_schema"}', v)
  switch (v.type) {
    case 'text': return null
    case 'json_object': return 'json'
    case 'json_schema': {
      const js = v.json_schema
      if (!isObj(js) || !isObj(js.schema)) return bad('response_format.json_schema.schema', 'a JSON Schema object', isObj(js) ? js.schema : js)
      const r = checkSchema(js.schema as Schema, 'response_format.json_schema.schema')
      return 'error' in r ? { status: 400, message: r.error, param: 'response_format.json_schema.schema' } : r.schema
    }
    default: return bad('response_format.type', '"text", "json_object" or "json_schema"', v.type)
  }
}

export function parseChatCompletion (body: unknown): OpenAiRequest | ApiError {
  const c = common('chat', body)
  if (isApiError(c)) return c
  const b = body as Record<string, unknown>
  const messages = parseMessages(b.messages)
  if (isApiError(messages)) return messages
  const format = responseFormat(b.response_format)
  if (isApiError(format)) return format
  const tools = parseTools(b)
  if (isApiError(tools)) return tools
  const r = c.gen
  if (tools !== null && tools.format !== null) {
    if (format !== null) return unsupported('response_format', 'a reply is held to one grammar: with "tools" a tool call\'s, so "response_format" needs "tool_choice": "none"')
    r.format = tools.format
    r.formatOptional = tools.choice === 'auto'
    r.messages = withInstructions(messages, tools)
  } else {
    r.format = format
    r.messages = messages
  }
  c.tools = tools
  return c
}

export function parseCompletion (body: unknown): OpenAiRequest | ApiError {
  const c = common('generate', body)
  if (isApiError(c)) return c
  const b = body as Record<string, unknown>
  let prompt = b.prompt ?? ''
  // one prompt: a string, or an array of one string (a batch of several would need n choices)
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') prompt = prompt[0]
  if (typeof prompt !== 'string') {
    return Array.isArray(prompt) && prompt.every((p) => typeof p === 'string')
      ? unsupported('prompt', 'one prompt per request (an array of one string at most)')
      : bad('prompt', 'a string (token arrays are those of OpenAI\'s tokenizers)', prompt)
  }
  if (set(b.suffix) && b.suffix !== '') return unsupported('suffix', `"${c.gen.displayModel}" does not support insert`)
  if (b.echo === true) return unsupported('echo', 'the prompt is not repeated in the reply')
  const bestOf = num(b, 'best_of', 1, 128, true)
  if (isApiError(bestOf)) return bestOf
  if (bestOf !== undefined && bestOf !== 1) return unsupported('best_of', 'one choice is generated per request')
  c.gen.prompt = prompt
  // OpenAI completes the text as it is: no chat template
  c.gen.raw = true
  return c
}
