// Ollama request bodies -> checked, typed requests. Every rejection names the
// field and what was wrong; statuses and the messages clients match on follow
// Ollama (docs/api.md, server/routes.go): 400 for bad input, 404 "model 'x' not
// found" (decided later, by the catalog), 400 "model is required" for chat.
// Unknown top-level fields and unknown option keys are ignored, as Ollama does.

import { describe } from '../../config/check.js'
import { type ApiError, type EmbedRequest, type GenRequest, isApiError as isErr, newGenRequest, type RequestOptions } from '../dispatch/request.js'
import type { ChatMessage, Format } from '../local/protocol.js'
import { parseModelName } from '../models/names.js'
import { checkSchema, type Schema } from '../structured/schema.js'

type Kind = 'float' | 'int' | 'bool' | 'strings'
/** Ollama's option keys; [kind, min, max, field] — field null = accepted and ignored (load-time or unsupported). */
const OPTIONS: Record<string, [Kind, number, number, keyof RequestOptions | null]> = {
  temperature: ['float', 0, 100, 'temperature'],
  top_k: ['int', 0, 1e9, 'topK'],
  top_p: ['float', 0, 1, 'topP'],
  min_p: ['float', 0, 1, 'minP'],
  seed: ['int', -(2 ** 53), 2 ** 53, 'seed'],
  num_predict: ['int', -2, 1e9, 'numPredict'],
  stop: ['strings', 0, 0, 'stop'],
  num_ctx: ['int', 1, 1 << 24, 'numCtx'],
  repeat_penalty: ['float', 0, 100, 'repeatPenalty'],
  repeat_last_n: ['int', -1, 1 << 24, 'repeatLastN'],
  presence_penalty: ['float', -100, 100, 'presencePenalty'],
  frequency_penalty: ['float', -100, 100, 'frequencyPenalty'],
  num_keep: ['int', -1, 1 << 24, null],
  typical_p: ['float', 0, 1, null],
  num_batch: ['int', 1, 1 << 24, null],
  num_gpu: ['int', -1, 1 << 16, null],
  main_gpu: ['int', 0, 1 << 16, null],
  num_thread: ['int', 0, 1 << 16, null],
  use_mmap: ['bool', 0, 0, null],
  use_mlock: ['bool', 0, 0, null],
  numa: ['bool', 0, 0, null],
  penalize_newline: ['bool', 0, 0, null],
  low_vram: ['bool', 0, 0, null],
  f16_kv: ['bool', 0, 0, null],
  vocab_only: ['bool', 0, 0, null],
  logits_all: ['bool', 0, 0, null],
  mirostat: ['int', 0, 2, null],
  mirostat_tau: ['float', 0, 1e6, null],
  mirostat_eta: ['float', 0, 1e6, null],
  tfs_z: ['float', 0, 1e6, null],
  draft_num_predict: ['int', 0, 1e6, null],
}

const bad = (field: string, expected: string, found: unknown): ApiError =>
  ({ status: 400, message: `invalid value for "${field}": expected ${expected}, found ${describe(found)}` })

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

const GO_DURATION = /^([-+]?)((?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)$/
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1e3, m: 6e4, h: 3.6e6 }

/** keep_alive: a number of seconds or a Go duration ("5m", "1h30m", "0"); negative = forever. NaN when malformed. */
export function parseKeepAliveValue (v: unknown): number {
  if (typeof v === 'number' && Number.isFinite(v)) return v < 0 ? -1 : Math.round(v * 1000)
  if (typeof v !== 'string') return NaN
  const s = v.trim()
  if (/^[-+]?\d+(\.\d+)?$/.test(s)) return parseKeepAliveValue(Number(s))
  const m = GO_DURATION.exec(s)
  if (m === null) return NaN
  let ms = 0
  for (const part of m[2]!.matchAll(/(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g)) ms += Number(part[1]) * UNIT_MS[part[2]!]!
  return m[1] === '-' ? -1 : Math.round(ms)
}

export function parseOptions (raw: unknown): RequestOptions | ApiError {
  const out: RequestOptions = {}
  if (raw === undefined || raw === null) return out
  if (!isObj(raw)) return bad('options', 'an object', raw)
  for (const [key, v] of Object.entries(raw)) {
    // own keys only: "constructor" or "__proto__" from the client must not find Object.prototype's
    const spec = Object.hasOwn(OPTIONS, key) ? OPTIONS[key] : undefined
    if (spec === undefined || v === null) continue
    const [kind, min, max, field] = spec
    const name = `options.${key}`
    if (kind === 'bool') {
      if (typeof v !== 'boolean') return bad(name, 'true or false', v)
      continue
    }
    if (kind === 'strings') {
      if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) return bad(name, 'an array of strings', v)
      if (field !== null) out.stop = (v as string[]).filter((s) => s !== '')
      continue
    }
    if (typeof v !== 'number' || !Number.isFinite(v) || (kind === 'int' && !Number.isInteger(v))) {
      return bad(name, kind === 'int' ? 'an integer' : 'a number', v)
    }
    if (v < min || v > max) return bad(name, `a value from ${min} to ${max}`, v)
    if (field !== null) (out as Record<string, number>)[field] = v
  }
  return out
}

function parseFormat (v: unknown): Format | null | ApiError {
  if (v === undefined || v === null || v === '') return null
  if (v === 'json') return 'json'
  if (isObj(v)) {
    const r = checkSchema(v as Schema)
    return 'error' in r ? { status: 400, message: r.error } : r.schema
  }
  return { status: 400, message: `invalid format: ${JSON.stringify(v)}; expected "json" or a valid JSON Schema object` }
}

function str (body: Record<string, unknown>, key: string): string | ApiError {
  const v = body[key]
  if (v === undefined || v === null) return ''
  return typeof v === 'string' ? v : bad(key, 'a string', v)
}

/** Checks the fields /api/generate and /api/chat share. */
function common (endpoint: 'generate' | 'chat', body: unknown): GenRequest | ApiError {
  if (body === null) body = {}
  if (!isObj(body)) return { status: 400, message: `invalid request: expected a JSON object, found ${describe(body)}` }
  const displayModel = str(body, 'model')
  if (isErr(displayModel)) return displayModel
  const model = displayModel === '' ? '' : parseModelName(displayModel)
  if (model === null) return { status: 400, message: 'invalid model name' }
  if (endpoint === 'chat' && model === '') return { status: 400, message: 'model is required' }
  const stream = body.stream ?? true
  if (typeof stream !== 'boolean') return bad('stream', 'true or false', stream)
  let keepAliveMs: number | null = null
  if (body.keep_alive !== undefined && body.keep_alive !== null) {
    keepAliveMs = parseKeepAliveValue(body.keep_alive)
    if (Number.isNaN(keepAliveMs)) return bad('keep_alive', 'seconds or a duration like "5m"', body.keep_alive)
  }
  const format = parseFormat(body.format)
  if (isErr(format)) return format
  const options = parseOptions(body.options)
  if (isErr(options)) return options
  // The seed's clients send temperature at the top level; options.temperature wins when both are set.
  if (body.temperature !== undefined && body.temperature !== null && options.temperature === undefined) {
    const t = body.temperature
    if (typeof t !== 'number' || !Number.isFinite(t) || t < 0 || t > 100) return bad('temperature', 'a number from 0 to 100', t)
    options.temperature = t
  }
  const think = body.think
  if (think !== undefined && think !== null && think !== false) return { status: 400, message: `"${displayModel}" does not support thinking` }
  if (body.top_logprobs !== undefined && body.top_logprobs !== null) {
    const n = body.top_logprobs
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 20) return { status: 400, message: 'top_logprobs must be between 0 and 20' }
  }
  for (const k of ['logprobs', 'truncate', 'shift'] as const) {
    if (body[k] !== undefined && body[k] !== null && typeof body[k] !== 'boolean') return bad(k, 'true or false', body[k])
  }
  const r = newGenRequest(endpoint, model, displayModel)
  r.stream = stream
  r.keepAliveMs = keepAliveMs
  r.format = format
  r.options = options
  r.truncate = body.truncate !== false
  return r
}

export function parseGenerate (body: unknown): GenRequest | ApiError {
  const r = common('generate', body)
  if (isErr(r)) return r
  const b = (body ?? {}) as Record<string, unknown>
  const prompt = str(b, 'prompt')
  if (isErr(prompt)) return prompt
  const system = str(b, 'system')
  if (isErr(system)) return system
  const template = str(b, 'template')
  if (isErr(template)) return template
  const suffix = str(b, 'suffix')
  if (isErr(suffix)) return suffix
  const raw = b.raw ?? false
  if (typeof raw !== 'boolean') return bad('raw', 'true or false', raw)
  let context: number[] | null = null
  if (b.context !== undefined && b.context !== null) {
    if (!Array.isArray(b.context) || b.context.some((t) => !Number.isInteger(t) || (t as number) < 0)) {
      return bad('context', 'an array of token ids', b.context)
    }
    context = b.context.length > 0 ? b.context as number[] : null
  }
  if (raw && (template !== '' || system !== '' || context !== null)) {
    return { status: 400, message: 'raw mode does not support template, system, or context' }
  }
  if (template !== '') return { status: 400, message: '"template" is not supported: the model\'s own chat template is used' }
  if (suffix !== '') return { status: 400, message: `"${r.displayModel}" does not support insert` }
  if (Array.isArray(b.images) && b.images.length > 0) return { status: 400, message: `"${r.displayModel}" does not support vision` }
  r.prompt = prompt
  r.system = system === '' ? null : system
  r.raw = raw
  r.context = context
  r.loadOnly = prompt === '' && r.system === null && context === null
  return r
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool'])

export function parseChat (body: unknown): GenRequest | ApiError {
  const r = common('chat', body)
  if (isErr(r)) return r
  const b = body as Record<string, unknown>
  if (Array.isArray(b.tools) && b.tools.length > 0) return { status: 400, message: `"${r.displayModel}" does not support tools` }
  const raw = b.messages ?? []
  if (!Array.isArray(raw)) return bad('messages', 'an array of messages', raw)
  const messages: ChatMessage[] = []
  for (let i = 0; i < raw.length; i++) {
    const m = raw[i] as unknown
    const at = `messages[${i}]`
    if (!isObj(m)) return bad(at, 'an object with "role" and "content"', m)
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) return bad(`${at}.role`, 'one of "system", "user", "assistant", "tool"', m.role)
    const content = m.content ?? ''
    if (typeof content !== 'string') return bad(`${at}.content`, 'a string', content)
    if (Array.isArray(m.images) && m.images.length > 0) return { status: 400, message: `"${r.displayModel}" does not support vision` }
    messages.push({ role: m.role as ChatMessage['role'], content })
  }
  r.messages = messages
  r.loadOnly = messages.length === 0
  return r
}

/**
 * /api/embed ({model, input: string | string[], truncate, dimensions, options, keep_alive}) and the legacy
 * /api/embeddings ({model, prompt}: one text, its vector not normalised).
 */
export function parseEmbed (body: unknown, legacy: boolean): EmbedRequest | ApiError {
  if (body === null) body = {}
  if (!isObj(body)) return { status: 400, message: `invalid request: expected a JSON object, found ${describe(body)}` }
  const displayModel = str(body, 'model')
  if (isErr(displayModel)) return displayModel
  if (displayModel === '') return { status: 400, message: 'model is required' }
  const model = parseModelName(displayModel)
  if (model === null) return { status: 400, message: 'invalid model name' }
  let inputs: string[]
  if (legacy) {
    const prompt = str(body, 'prompt')
    if (isErr(prompt)) return prompt
    inputs = prompt === '' ? [] : [prompt]
  } else {
    const input = body.input ?? []
    if (typeof input === 'string') inputs = [input]
    else if (Array.isArray(input) && input.every((x) => typeof x === 'string')) inputs = input as string[]
    else return bad('input', 'a string or an array of strings', input)
  }
  let keepAliveMs: number | null = null
  if (body.keep_alive !== undefined && body.keep_alive !== null) {
    keepAliveMs = parseKeepAliveValue(body.keep_alive)
    if (Number.isNaN(keepAliveMs)) return bad('keep_alive', 'seconds or a duration like "5m"', body.keep_alive)
  }
  const options = parseOptions(body.options)
  if (isErr(options)) return options
  if (body.truncate !== undefined && body.truncate !== null && typeof body.truncate !== 'boolean') return bad('truncate', 'true or false', body.truncate)
  const dimensions = body.dimensions ?? 0
  if (typeof dimensions !== 'number' || !Number.isInteger(dimensions) || dimensions < 0) return bad('dimensions', 'a positive integer', dimensions)
  return { model, displayModel, inputs, keepAliveMs, truncate: body.truncate !== false, normalize: !legacy, dimensions, numCtx: options.numCtx ?? null }
}

export { isErr as isApiError }
