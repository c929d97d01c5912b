// OpenAI response shapes for /v1/chat/completions and /v1/completions.
// Streams are server-sent events in the order Ollama's OpenAI layer writes
// them: content chunks (finish_reason null), one finish chunk with the
// finish_reason, a usage chunk with `choices: []` only when the request set
// stream_options.include_usage (then every other chunk carries "usage": null,
// as OpenAI's do), and `data: [DONE]`. An error after the stream began is an
// event `data: {"error": {...}}` (which the official clients raise) and the
// end of the stream, without [DONE].
// A reply that is a tool call (openai/tools.ts) is held back and sent whole
// in one chunk, as Ollama does: with tool_choice "auto" the first character
// decides ("{" starts a call), with "required" or a named function it always is.

import { randomBytes } from 'node:crypto'
import type { GenResponse } from '../http/gen-response.js'
import { openaiError } from '../../api-errors.js'
import type { ReplyWriter } from '../dispatch/generation.js'
import type { ApiError } from '../dispatch/request.js'
import { sendError, sendJson } from '../http/respond.js'
import type { JobResult } from '../local/protocol.js'
import type { OpenAiRequest } from './request.js'
import { decodeCall, type ToolCall } from './tools.js'

export const SSE_TYPE = 'text/event-stream'
const FINGERPRINT = 'fp_lb'

export class OpenAiWriter implements ReplyWriter {
  private readonly res: GenResponse
  private readonly chat: boolean
  private readonly req: OpenAiRequest
  private readonly id: string
  private readonly created = Math.floor(Date.now() / 1000)
  /** Every chunk up to the text of its piece, and from the text on. */
  private readonly head: string
  private readonly tail: string
  /** text: pieces are streamed as they come; hold: the reply is (maybe) a tool call, kept until the end; undecided: auto, nothing seen yet. */
  private mode: 'text' | 'hold' | 'undecided'
  private held = ''
  private started = false

  constructor (res: GenResponse, chat: boolean, req: OpenAiRequest) {
    this.res = res
    this.chat = chat
    this.req = req
    this.id = `${chat ? 'chatcmpl' : 'cmpl'}-${randomBytes(12).toString('hex')}`
    const plan = req.tools
    this.mode = plan === null || plan.format === null ? 'text' : plan.choice === 'auto' ? 'undecided' : 'hold'
    const usage = req.includeUsage ? ',"usage":null' : ''
    this.head = `${this.prefix()},"choices":[{"index":0,${chat ? '"delta":{"role":"assistant","content":' : '"text":'}`
    this.tail = `${chat ? '}' : ''},"logprobs":null,"finish_reason":null}]${usage}}\n\n`
  }

  pieces (texts: readonly string[]): void {
    if (this.mode === 'undecided') {
      const first = texts.find((t) => t !== '')
      if (first === undefined) return
      this.mode = first.startsWith('{') ? 'hold' : 'text'
    }
    if (this.mode === 'hold') {
      for (const t of texts) this.held += t
      return
    }
    let out = ''
    for (const t of texts) out += 'data: ' + this.head + JSON.stringify(t) + this.tail
    this.begin()
    this.res.write(out)
  }

  done (r: JobResult): void {
    const text = this.req.gen.stream ? this.held : r.text
    const call = this.req.tools === null ? null : decodeCall(text, this.req.tools)
    const finish = r.doneReason === 'length' ? 'length' : call !== null ? 'tool_calls' : 'stop'
    const usage = { prompt_tokens: r.promptTokens, completion_tokens: r.evalTokens, total_tokens: r.promptTokens + r.evalTokens }
    if (!this.req.gen.stream) {
      const choice = this.chat
        ? { index: 0, message: call === null ? { role: 'assistant', content: text } : { role: 'assistant', content: null, tool_calls: [call] }, logprobs: null, finish_reason: finish }
        : { text, index: 0, logprobs: null, finish_reason: finish }
      sendJson(this.res, 200, JSON.stringify({ ...this.object(), choices: [choice], usage }))
      return
    }
    let out = ''
    if (call !== null) out += this.event([{ index: 0, delta: { role: 'assistant', content: null, tool_calls: [{ index: 0, ...call } satisfies ToolCall & { index: number }] }, logprobs: null, finish_reason: null }])
    else if (this.held !== '') out += 'data: ' + this.head + JSON.stringify(this.held) + this.tail
    out += this.event([this.chat ? { index: 0, delta: {}, logprobs: null, finish_reason: finish } : { text: '', index: 0, logprobs: null, finish_reason: finish }])
    if (this.req.includeUsage) out += `data: ${JSON.stringify({ ...this.object(true), choices: [], usage })}\n\n`
    out += 'data: [DONE]\n\n'
    this.begin()
    this.res.end(out)
  }

  /** OpenAI requests never only load a model (an empty prompt is completed like any other); nothing to say. */
  loaded (): void {
    this.done({ doneReason: 'stop', text: '', promptTokens: 0, evalTokens: 0, loadNs: 0, promptNs: 0, evalNs: 0, context: null, truncated: false, embeddings: null })
  }

  fail (e: ApiError): void {
    const res = this.res
    if (res.writableEnded || res.destroyed) return
    if (this.started) res.end(`data: ${JSON.stringify(openaiError(e.status, e.message, e))}\n\n`)
    else sendError(res, 'openai', e)
  }

  private object (chunk = this.req.gen.stream): Record<string, unknown> {
    const object = this.chat ? (chunk ? 'chat.completion.chunk' : 'chat.completion') : 'text_completion'
    return { id: this.id, object, created: this.created, model: this.req.gen.displayModel, system_fingerprint: FINGERPRINT }
  }

  private prefix (): string {
    const o = JSON.stringify(this.object())
    return o.slice(0, -1)
  }

  private event (choices: unknown[]): string {
    const o: Record<string, unknown> = { ...this.object(), choices }
    if (this.req.includeUsage) o.usage = null
    return `data: ${JSON.stringify(o)}\n\n`
  }

  private begin (): void {
    if (this.started) return
    this.started = true
    this.res.writeHead(200, { 'content-type': SSE_TYPE, 'cache-control': 'no-cache' })
  }
}
