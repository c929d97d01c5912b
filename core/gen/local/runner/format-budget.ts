// Keeps a formatted reply (`format` set) valid JSON within its token budget.
//
// The grammar keeps every prefix valid but cannot make the document end in
// time: a model may write one string until num_predict or the context cuts it.
// After each sampled token the shortest text that would complete the document
// (structured/json-close.ts) is known, and:
// 1. Steering: in the last quarter of the budget (at most the last STEER_LAST
//    tokens), or once the budget left is close to that closing's size, the
//    closing's first token gets a logit bonus of STEER_LOGIT. The grammar still
//    decides what is legal; among legal tokens the model is led along the
//    shortest completion, and usually ends the document itself ("stop").
// 2. Guarantee: generation stops while the closing still fits in what the
//    budget leaves, with one token to spare (the next token could lengthen
//    it), and the reply gets that closing appended (close(); "length"). So
//    the document always parses and matches the schema. It goes past the
//    budget only when the budget is smaller than the shortest document, or
//    when one token lengthens the closing by more than one token (opening an
//    object with required properties); then by that closing text alone.

import { TokenBias, type LlamaModel, type Token } from 'node-llama-cpp'
import { JsonCloser } from '../../structured/json-close.js'
import type { Format } from '../protocol.js'

/** Steering starts at most this many tokens before the end of the budget. */
const STEER_LAST = 48
/** Steering also starts when the budget left is within this many tokens of the closing's size in bytes. */
const STEER_MARGIN = 8
/** Logit bonus of the closing's next token: far above what a model's own logits differ by. */
const STEER_LOGIT = 40
/**
 * Far from the end (budget left above twice the last closing's bytes plus FAR), the closing is measured
 * only every EVERY tokens: its cost grows with the document (keys of a large object), the budget's does not.
 */
const FAR = 64
const EVERY = 16

export class FormatBudget {
  /** Aborted when the closing must be written now; generate.ts combines it with the job's signal. */
  readonly stop = new AbortController()
  private readonly model: LlamaModel
  private readonly budget: number
  private readonly doc: JsonCloser
  private readonly steerAt: number
  private readonly none: TokenBias
  private steer: TokenBias | null = null
  private lastBytes = 0
  private skip = 0
  /** An optional format (a tool call the model may make) until the reply's first character shows whether it is one. */
  private undecided: boolean
  /** The reply is text, not a document: nothing to keep valid. */
  private off = false

  constructor (format: Format, model: LlamaModel, budget: number, optional = false) {
    this.undecided = optional
    this.model = model
    this.budget = budget
    this.doc = new JsonCloser(format)
    this.steerAt = budget - Math.min(STEER_LAST, Math.floor(budget / 4))
    this.none = new TokenBias(model.tokenizer)
  }

  /** LlamaCompletion's tokenBias, asked before each token. */
  readonly bias = (): TokenBias => this.steer ?? this.none

  /** Sampled tokens; `used`: tokens sampled so far, these included. */
  onTokens (toks: readonly Token[], used: number): void {
    if (this.stop.signal.aborted || this.off) return
    // Text of structure is ASCII and always whole tokens; bytes of a split character only occur inside strings.
    const text = this.model.detokenize(toks as Token[])
    if (this.undecided) {
      if (text === '') return
      this.undecided = false
      // the grammar lets a reply that does not open with "{" be any text
      if (!text.startsWith('{')) { this.off = true; return }
    }
    this.doc.push(text)
    const left = this.budget - used
    if (left <= 0 || this.doc.complete) return
    const far = used < this.steerAt && left > 2 * this.lastBytes + FAR
    if (far && this.skip-- > 0) return
    this.skip = EVERY
    const closing = this.doc.closing()
    const bytes = Buffer.byteLength(closing)
    this.lastBytes = bytes
    this.steer = null
    if (used < this.steerAt && bytes + STEER_MARGIN < left) return
    const need = this.tokens(closing)
    if (need.length >= left - 1) {
      this.stop.abort()
      return
    }
    this.steer = new TokenBias(this.model.tokenizer)
    this.steer.set(need[0]!, { logit: STEER_LOGIT })
  }

  /** The closing text's tokens (as a continuation: no prefix space). */
  tokens (text: string): Token[] {
    return text === '' ? [] : this.model.tokenize(text, false, 'trimLeadingSpace')
  }

  /** The shortest text that makes `text` (the whole reply) a complete document that matches the format; `optional`: text not opening with "{" is complete. */
  static close (format: Format, text: string, optional = false): string {
    if (optional && !text.startsWith('{')) return ''
    const doc = new JsonCloser(format)
    doc.push(text)
    return doc.closing()
  }
}
