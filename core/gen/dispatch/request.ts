// A request for a model as both client APIs ask it: ollama/ and openai/ turn
// their bodies into these, dispatch/ serves them without knowing which API
// asked, and each API's writer turns the result back into its wire shape.

import type { ErrorDetail } from '../../api-errors.js'
import type { ChatMessage, Format } from '../local/protocol.js'

/** A refusal: the status, a message naming what was wrong, and what OpenAI's body carries besides. */
export interface ApiError extends ErrorDetail {
  status: number
  message: string
  /** Seconds a refused client should wait (a 429's Retry-After header). */
  retryAfter?: number
}

export const isApiError = (v: unknown): v is ApiError =>
  typeof v === 'object' && v !== null && typeof (v as ApiError).status === 'number' && typeof (v as ApiError).message === 'string'

/** Options a request may set; absent = the model's or Ollama's default. */
export interface RequestOptions {
  temperature?: number
  topK?: number
  topP?: number
  minP?: number
  seed?: number
  numPredict?: number
  stop?: string[]
  numCtx?: number
  repeatPenalty?: number
  repeatLastN?: number
  presencePenalty?: number
  frequencyPenalty?: number
}

export interface GenRequest {
  endpoint: 'generate' | 'chat'
  /** Canonical "name:tag"; "" when the request named none. */
  model: string
  /** The name as sent, echoed in replies as Ollama and OpenAI do. */
  displayModel: string
  stream: boolean
  /** null = the server default; -1 = forever. */
  keepAliveMs: number | null
  prompt: string
  system: string | null
  raw: boolean
  context: number[] | null
  messages: ChatMessage[] | null
  format: Format | null
  /**
   * The reply is either text that does not start with "{" or a document of `format` (OpenAI's tool_choice
   * "auto": a reply that starts a tool call is held to the call's grammar; one that does not is free text).
   */
  formatOptional: boolean
  options: RequestOptions
  /** Ollama's `truncate`: a prompt longer than the limit keeps its end (true, the default) or is refused (false). */
  truncate: boolean
  /** Ollama's empty prompt (or no messages): load the model (or unload it with keep_alive 0), generate nothing. */
  loadOnly: boolean
  /** The field that set options.numPredict, as the caller wrote it (a refusal names it). */
  numPredictField: string
}

/** Embeddings of one or more texts (Ollama's /api/embed and /api/embeddings, OpenAI's /v1/embeddings). */
export interface EmbedRequest {
  model: string
  displayModel: string
  inputs: string[]
  keepAliveMs: number | null
  /** A text longer than the context keeps its start (Ollama's `truncate`, default true) or is refused. */
  truncate: boolean
  /** Scale each vector to length 1 (/api/embed and OpenAI do; the legacy /api/embeddings does not). */
  normalize: boolean
  /** Keep the first n dimensions (then normalised again); 0 = all. */
  dimensions: number
  numCtx: number | null
}

export const newGenRequest = (endpoint: GenRequest['endpoint'], model: string, displayModel: string): GenRequest => ({
  endpoint, model, displayModel, stream: true, keepAliveMs: null, prompt: '', system: null, raw: false, context: null,
  messages: null, format: null, formatOptional: false, options: {}, truncate: true, loadOnly: false, numPredictField: 'options.num_predict',
})
