// Ollama response shapes for /api/generate and /api/chat, and the way they are
// written: NDJSON (one compact object per line) when streaming, one JSON
// document otherwise. Intermediate lines are built by string concatenation
// around a per-request prefix, because there is one per token; the lines of one
// batch of pieces go out in one write.

import type { ServerResponse } from 'node:http'
import type { JobResult } from '../local/protocol.js'

export const NDJSON = 'application/x-ndjson'
export const JSON_TYPE = 'application/json; charset=utf-8'

/** RFC 3339 UTC time, as Ollama's created_at (millisecond precision). */
export const nowIso = (): string => new Date().toISOString()

/** Writes one request's reply: chunks, then the final object or an error line. */
export class ReplyWriter {
  readonly chat: boolean
  readonly stream: boolean
  private readonly model: string
  private readonly prefix: string
  /** The NDJSON headers are written (the stream has begun). */
  private started = false

  constructor (chat: boolean, stream: boolean, model: string) {
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
  pieces (res: ServerResponse, texts: readonly string[], ts: string): void {
    if (!this.started) this.begin(res)
    const head = `${this.prefix}${ts}",${this.chat ? '"message":{"role":"assistant","content":' : '"response":'}`
    const tail = this.chat ? '},"done":false}\n' : ',"done":false}\n'
    let out = ''
    for (const t of texts) out += head + JSON.stringify(t) + tail
    res.write(out)
  }

  /** The final object (streamed as the last line, or as the whole body). */
  done (res: ServerResponse, r: JobResult, totalNs: number): void {
    const o: Record<string, unknown> = { model: this.model, created_at: nowIso() }
    if (this.chat) o.message = { role: 'assistant', content: this.stream ? '' : r.text }
    else o.response = this.stream ? '' : r.text
    o.done = true
    o.done_reason = r.doneReason
    if (r.doneReason !== 'load' && r.doneReason !== 'unload') {
      if (!this.chat && r.context !== null) o.context = r.context
      o.total_duration = totalNs
      o.load_duration = r.loadNs
      o.prompt_eval_count = r.promptTokens
      o.prompt_eval_duration = r.promptNs
      o.eval_count = r.evalTokens
      o.eval_duration = r.evalNs
      // Not in Ollama (which only logs it): the start of the prompt was dropped to fit the context.
      if (r.truncated) o.prompt_truncated = true
    }
    const body = JSON.stringify(o)
    if (this.stream) {
      if (!this.started) this.begin(res)
      res.end(body + '\n')
    } else {
      sendJson(res, 200, body)
    }
  }

  /** An error: a normal JSON error before anything was sent, else a final NDJSON error line (status stays 200). */
  fail (res: ServerResponse, status: number, message: string): void {
    if (res.writableEnded || res.destroyed) return
    if (this.started) res.end(JSON.stringify({ error: message }) + '\n')
    else sendError(res, status, message)
  }

  private begin (res: ServerResponse): void {
    this.started = true
    res.writeHead(200, { 'content-type': NDJSON })
  }
}

export function sendJson (res: ServerResponse, status: number, body: string): void {
  if (res.headersSent) {
    res.end()
    return
  }
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

export function sendError (res: ServerResponse, status: number, message: string): void {
  sendJson(res, status, JSON.stringify({ error: message }))
}

export function sendText (res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}
