// Ollama response shapes for /api/generate and /api/chat, and the way they are
// written: NDJSON (one compact object per line) when streaming, one JSON
// document otherwise. Intermediate lines are built by string concatenation
// around a per-request prefix, because there is one per token; the lines of one
// batch of pieces go out in one write.

import { isoNow } from '../../clock.js'
import type { GenResponse } from '../http/gen-response.js'
import type { ReplyWriter } from '../dispatch/generation.js'
import type { ApiError } from '../dispatch/request.js'
import { sendError, sendJson } from '../http/respond.js'
import type { JobResult } from '../local/protocol.js'

export const NDJSON = 'application/x-ndjson'

/** Writes one request's reply: chunks, then the final object or an error line. */
export class OllamaWriter implements ReplyWriter {
  readonly chat: boolean
  readonly stream: boolean
  private readonly res: GenResponse
  private readonly model: string
  private readonly prefix: string
  /** The NDJSON headers are written (the stream has begun). */
  private started = false

  constructor (res: GenResponse, chat: boolean, stream: boolean, model: string) {
    this.res = res
    this.chat = chat
    this.stream = stream
    this.model = model
    this.prefix = `{"model":${JSON.stringify(model)},"created_at":"`
  }

  /**
   * Consecutive streamed pieces, one NDJSON line each, written as one chunk:
   * one write (one HTTP chunk, one socket write) per batch instead of per
   * piece, which is what the client's parser pays for. `ts` is the batch's
   * arrival time.
   */
  pieces (texts: readonly string[], ts: string): void {
    if (!this.started) this.begin()
    const head = `${this.prefix}${ts}",${this.chat ? '"message":{"role":"assistant","content":' : '"response":'}`
    const tail = this.chat ? '},"done":false}\n' : ',"done":false}\n'
    let out = ''
    for (const t of texts) out += head + JSON.stringify(t) + tail
    this.res.write(out)
  }

  /** The final object (streamed as the last line, or as the whole body). */
  done (r: JobResult, totalNs: number): void {
    const o: Record<string, unknown> = { model: this.model, created_at: isoNow() }
    if (this.chat) o.message = { role: 'assistant', content: this.stream ? '' : r.text }
    else o.response = this.stream ? '' : r.text
    o.done = true
    o.done_reason = r.doneReason
    if (!this.chat && r.context !== null) o.context = r.context
    o.total_duration = totalNs
    o.load_duration = r.loadNs
    o.prompt_eval_count = r.promptTokens
    o.prompt_eval_duration = r.promptNs
    o.eval_count = r.evalTokens
    o.eval_duration = r.evalNs
    // Not in Ollama (which only logs it): the start of the prompt was dropped to fit the context.
    if (r.truncated) o.prompt_truncated = true
    this.end(JSON.stringify(o))
  }

  /** Replies `done_reason` load/unload without generating (empty prompt or no messages). */
  loaded (reason: 'load' | 'unload'): void {
    const o: Record<string, unknown> = { model: this.model, created_at: isoNow() }
    if (this.chat) o.message = { role: 'assistant', content: '' }
    else o.response = ''
    o.done = true
    o.done_reason = reason
    sendJson(this.res, 200, JSON.stringify(o))
  }

  /** An error: a normal JSON error before anything was sent, else a final NDJSON error line (status stays 200). */
  fail (e: ApiError): void {
    const res = this.res
    if (res.writableEnded || res.destroyed) return
    if (this.started) res.end(JSON.stringify({ error: e.message }) + '\n')
    else sendError(res, 'ollama', e)
  }

  private end (body: string): void {
    if (this.stream) {
      if (!this.started) this.begin()
      this.res.end(body + '\n')
    } else {
      sendJson(this.res, 200, body)
    }
  }

  private begin (): void {
    this.started = true
    this.res.writeHead(200, { 'content-type': NDJSON })
  }
}
