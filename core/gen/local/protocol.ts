// Every message of the generation pipeline, typed once:
//
//   API server (main process) --IPC--> runner (child process) --piscina task + MessagePort--> task (worker thread)
//
// Everything here is plain data: it crosses process.send (JSON) and
// postMessage (structured clone), so no classes, no functions, no undefined
// fields that matter. Each receiver handles its union in one `switch` with a
// `never` check, so adding a message type is a compile error until every
// receiver handles it.

import type { MessagePort } from 'node:worker_threads'

/** A chat message as Ollama sends it (images, tool calls are refused earlier). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool'
  content: string
}

/** Sampling settings, Ollama defaults already applied (http/routes.ts DEFAULTS, buildJob). */
export interface Sampling {
  temperature: number
  topK: number
  topP: number
  minP: number
  /** Always set: the API layer draws a random one when the request has none. */
  seed: number
  repeatPenalty: number
  repeatLastN: number
  presencePenalty: number
  frequencyPenalty: number
}

/** `"json"` or a JSON-Schema object (already checked for supported keywords). */
export type Format = 'json' | { readonly [k: string]: unknown }

/** One request, as the runner and the task see it. */
export interface JobSpec {
  kind: 'generate' | 'chat' | 'load' | 'embed'
  /** Canonical model name: the scheduler's key for the model (the runner pins a model to a worker by modelPath). */
  model: string
  modelPath: string
  /** Context window per sequence, tokens. */
  numCtx: number
  /** False: no pieces are sent, the whole text comes back in JobResult.text. */
  stream: boolean
  prompt: string
  system: string | null
  /** Generate only: no template, the prompt is fed as is. */
  raw: boolean
  /** Generate only: tokens of an earlier reply (Ollama's deprecated `context`). */
  context: number[] | null
  /** Chat only. */
  messages: ChatMessage[] | null
  format: Format | null
  /** The reply is either text that does not start with "{" or a document of `format` (a tool call the model may make). */
  formatOptional: boolean
  sampling: Sampling
  /** Maximum tokens to generate; -1 = until end of text or the context is full. */
  numPredict: number
  stop: string[]
  /** Generate, not raw: return prompt + reply tokens as `context`. */
  returnContext: boolean
  /** A prompt longer than the limit keeps its end (Ollama's `truncate`, default true); false: the job fails with 400. */
  truncate: boolean
  /** Embed only: the texts to embed (each cut to its start when longer than the context and `truncate`). */
  inputs: string[] | null
}

export const DONE_REASONS = ['stop', 'length', 'load', 'unload', 'cancel'] as const
export type DoneReason = typeof DONE_REASONS[number]

export interface JobResult {
  doneReason: DoneReason
  /** The whole reply when the job was not streamed, else "". */
  text: string
  promptTokens: number
  evalTokens: number
  /** Durations in nanoseconds, as Ollama reports them. */
  loadNs: number
  promptNs: number
  evalNs: number
  context: number[] | null
  /** The start of the prompt was dropped to fit the context (or max_prompt_tokens). */
  truncated: boolean
  /** Embed only: one vector per input, as the model pools it (not normalised). */
  embeddings: number[][] | null
}

/** Settings the runner needs; sent once after spawn. */
export interface RunnerConf {
  workers: number
  threads: number
  parallel: number
  contexts: number
  /** Streamed pieces of a reply leave the worker at most this often, in ms (runner/pieces.ts). */
  streamBatchMs: number
  /** Prompt tokens evaluated at most (generation.max_prompt_tokens); 0 = what the context leaves for a reply. */
  maxPromptTokens: number
}

// ---- main -> runner (process.send) ----
export type ToRunner =
  | { type: 'init', conf: RunnerConf }
  | { type: 'run', id: number, job: JobSpec }
  | { type: 'cancel', id: number }
  | { type: 'unload', modelPath: string }
  | { type: 'shutdown' }

// ---- runner -> main (process.send of an array, flushed once per event-loop turn) ----
/** Consecutive pieces of one job's reply, in order (see runner/pieces.ts for why they are grouped). */
export type Pieces = { type: 'pieces', id: number, texts: string[] }
export type Done = { type: 'done', id: number, result: JobResult }
/** status: the HTTP status the API answers with (400 bad input, 404 missing file, 500 runner error). */
export type Failed = { type: 'failed', id: number, status: number, message: string }
export type FromRunner =
  | { type: 'ready', pid: number }
  | Pieces
  | Done
  | Failed

// ---- runner -> task (piscina task payload; `port` is transferred) ----
export type WorkerTask =
  | { type: 'job', id: number, job: JobSpec, conf: RunnerConf, port: MessagePort }
  | { type: 'unload', modelPath: string }
  /** Resolves once the worker has initialised llama.cpp; the runner is ready after every worker answered. */
  | { type: 'warm' }

/** What a task resolves with. */
export type WorkerResult = Done | Failed | { type: 'unloaded' } | { type: 'warm' }

// ---- on a task's MessagePort ----
/**
 * task -> runner: pieces as they are generated, then exactly one Done or Failed.
 * The end travels on the same port as the pieces because messages on two
 * different ports (this one and piscina's) have no order between them.
 */
export type FromTask = Pieces | Done | Failed
/** runner -> task: stop generating (client gone, time-out, shutdown). */
export type ToTask = { type: 'cancel' }

/** Marks a failure that should reach the client with a 4xx status rather than 500. */
export interface StatusError extends Error { status: number }

export function statusError (status: number, message: string): StatusError {
  const e = new Error(message) as StatusError
  e.status = status
  return e
}
