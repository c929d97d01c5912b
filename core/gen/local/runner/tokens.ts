// Tokenization in time linear in the text's length, and the tail of a long
// text in time linear in the tail.
//
// Why: llama.cpp's SentencePiece tokenizer grows its output with an exact
// `reserve` for every symbol that falls back to byte tokens, so each fallback
// copies the whole output: quadratic. With a byte-level vocabulary (lb-tiny),
// or text a vocabulary does not cover (emoji, scripts it was not trained on),
// 160 KB took 4.8 s and 320 KB ~19 s in one native call that no abort signal
// reaches, while a worker thread that every job of the model shares waits.
// Tokenizing in chunks of CHUNK characters bounds each call; chunks after the
// first are tokenized as a continuation ("trimLeadingSpace": no second
// SentencePiece prefix space), and cut just before a space between two words,
// where tokens start anyway, so the tokens are those of one call unless a token
// would have spanned the cut (only possible in a run of LOOK_BACK characters
// without a single space between words).

import type { LlamaModel, Token, Tokenizer } from 'node-llama-cpp'

/** Characters per native tokenize call; small enough that one call's quadratic part stays in the microseconds. */
const CHUNK = 4096
/** How far back from a chunk's end a cut looks for white space, in characters. */
const LOOK_BACK = 512

/** NaN (past the end) counts as white space. */
const isSpace = (c: number): boolean => !(c > 0x20)

/** The start of the chunk that ends at `end`: at most CHUNK characters before it, at a space between two words when there is one. */
function chunkStart (text: string, end: number): number {
  let start = end - CHUNK
  if (start <= 0) return 0
  for (let i = start; i > start - LOOK_BACK && i > 0; i--) {
    if (text.charCodeAt(i) === 0x20 && !isSpace(text.charCodeAt(i - 1)) && !isSpace(text.charCodeAt(i + 1))) return i
  }
  // No white space nearby: never cut a surrogate pair.
  const c = text.charCodeAt(start)
  if (c >= 0xdc00 && c <= 0xdfff) start--
  return start
}

function piece (model: LlamaModel, text: string, start: number, end: number, continuation: boolean): Token[] {
  return model.tokenize(text.slice(start, end), false, continuation || start > 0 ? 'trimLeadingSpace' : undefined)
}

/** The tokens of `text` (no special tokens parsed); `continuation`: it follows other text (no prefix space). */
export function tokenizeLinear (model: LlamaModel, text: string, continuation = false): Token[] {
  if (text.length <= CHUNK) return model.tokenize(text, false, continuation ? 'trimLeadingSpace' : undefined)
  const parts: Token[][] = []
  for (let end = text.length; end > 0;) {
    const start = chunkStart(text, end)
    parts.push(piece(model, text, start, end, continuation))
    end = start
  }
  return parts.reverse().flat()
}

/**
 * The last `limit` tokens of `text`, tokenizing only as much of its end as
 * needed (from the end, chunk by chunk). `cut`: tokens before them were dropped.
 */
export function tailTokens (model: LlamaModel, text: string, limit: number): { tokens: Token[], cut: boolean } {
  const parts: Token[][] = []
  let n = 0
  let end = text.length
  while (end > 0 && n <= limit) {
    const start = chunkStart(text, end)
    const p = piece(model, text, start, end, false)
    parts.push(p)
    n += p.length
    end = start
  }
  const tokens = parts.reverse().flat()
  if (tokens.length <= limit && end === 0) return { tokens, cut: false }
  return { tokens: tokens.slice(tokens.length - limit), cut: true }
}

const tokenizers = new WeakMap<LlamaModel, Tokenizer>()

/** model.tokenizer with plain text tokenized by tokenizeLinear; for LlamaText.tokenize (chat templates). */
export function linearTokenizer (model: LlamaModel): Tokenizer {
  let t = tokenizers.get(model)
  if (t !== undefined) return t
  const base = model.tokenizer
  const fn = (text: string, special?: boolean | 'builtin', options?: 'trimLeadingSpace'): Token[] =>
    special === false || special === undefined
      ? tokenizeLinear(model, text, options === 'trimLeadingSpace')
      : base(text as never, special as never, options as never)
  t = Object.assign(fn, {
    detokenize: base.detokenize,
    isSpecialToken: base.isSpecialToken,
    isEogToken: base.isEogToken,
  }) as unknown as Tokenizer
  tokenizers.set(model, t)
  return t
}
