// What a model server's streamed reply amounts to, whichever wire it came on:
// the wire readers (ollama-wire.ts, openai-wire.ts) fill it message by
// message, the client (client.ts) hands its text to the caller as pieces and
// turns its end into the JobResult the local runner would have given, so the
// ReplyWriters of both client APIs write a remote reply as they write a local one.

import type { DoneReason, JobResult } from '../local/protocol.js'

export class ReplyState {
  /** Texts read since the caller last took them. */
  texts: string[] = []
  /** The whole reply (kept only when the client did not ask for a stream). */
  whole = ''
  /** The server said the reply is complete. */
  finished = false
  doneReason: DoneReason = 'stop'
  /** -1: the server did not say (then counted here). */
  promptTokens = -1
  evalTokens = -1
  /** Content messages seen: the completion tokens when a server gives no usage (one token per message is what servers stream). */
  contentMessages = 0
  loadNs = 0
  promptNs = -1
  evalNs = -1
  context: number[] | null = null
  /** process.hrtime.bigint() when the request was sent, and when the first text arrived (0n: none yet). */
  readonly sentAt: bigint
  firstAt = 0n

  readonly keepWhole: boolean

  constructor (keepWhole: boolean) {
    this.keepWhole = keepWhole
    this.sentAt = process.hrtime.bigint()
  }

  text (t: string): void {
    if (t === '') return
    if (this.firstAt === 0n) this.firstAt = process.hrtime.bigint()
    this.contentMessages++
    this.texts.push(t)
    if (this.keepWhole) this.whole += t
  }

  /** The texts read since the last call. */
  take (): string[] {
    const t = this.texts
    this.texts = []
    return t
  }

  /** The result of the reply; durations the server did not report are measured here (time to first text, then the rest). */
  result (): JobResult {
    const now = process.hrtime.bigint()
    const first = this.firstAt === 0n ? now : this.firstAt
    return {
      doneReason: this.doneReason,
      text: this.whole,
      promptTokens: Math.max(0, this.promptTokens),
      evalTokens: this.evalTokens >= 0 ? this.evalTokens : this.contentMessages,
      loadNs: this.loadNs,
      promptNs: this.promptNs >= 0 ? this.promptNs : Number(first - this.sentAt),
      evalNs: this.evalNs >= 0 ? this.evalNs : Number(now - first),
      context: this.context,
      truncated: false,
      embeddings: null,
    }
  }
}

/** A failure the server reported inside its stream (an error line or event). */
export class StreamError extends Error {}
