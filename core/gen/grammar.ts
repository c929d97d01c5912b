// Structured output: `format` -> a grammar that constrains sampling, plus a
// "wind-down" bias that makes the JSON finish inside the token budget.
//
// The grammar guarantees every prefix can still become valid JSON, but not
// that it ends: a model may keep writing a string forever and be cut by
// num_predict or the context. So when the remaining budget gets small, tokens
// that close something (`}` `]`, then `"`) get a large logit bonus and
// whitespace a malus; the grammar still decides what is legal, so the bias only
// chooses, among legal tokens, the ones that finish the document. A document
// nested deeper than the reserve allows can still be cut (done_reason "length").

import { TokenBias, type LlamaGrammar, type LlamaModel, type Token } from 'node-llama-cpp'
import { llama } from './model-host.js'
import { statusError, type Format } from './protocol.js'

const CACHE = 32
const grammars = new Map<string, Promise<LlamaGrammar>>()
const biases = new WeakMap<LlamaModel, { close: TokenBias, none: TokenBias }>()

// node-llama-cpp's integer rule allows an exponent ("-5e-20"), which is not an
// integer; replace it with plain integers so replies match `"type": "integer"`.
const INTEGER_RULE = /^integer-number-rule ::= .*$/m
const INTEGER_FIXED = 'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15})'

async function compile (format: Format): Promise<LlamaGrammar> {
  if (format === 'json') return await llama.getGrammarFor('json')
  let g: LlamaGrammar
  try {
    // The schema was checked and reduced to node-llama-cpp's subset by schema.ts.
    g = await llama.createGrammarForJsonSchema(format as unknown as Parameters<typeof llama.createGrammarForJsonSchema>[0])
  } catch (e) {
    throw statusError(400, `invalid JSON schema in format: ${(e as Error).message}`)
  }
  if (!INTEGER_RULE.test(g.grammar)) return g
  return await llama.createGrammar({
    grammar: g.grammar.replace(INTEGER_RULE, INTEGER_FIXED),
    stopGenerationTriggers: g.stopGenerationTriggers,
    trimWhitespaceSuffix: g.trimWhitespaceSuffix,
  })
}

/** The grammar for a format, compiled once per worker (small LRU). */
export async function grammarFor (format: Format): Promise<LlamaGrammar> {
  const key = format === 'json' ? 'json' : JSON.stringify(format)
  let p = grammars.get(key)
  if (p !== undefined) {
    grammars.delete(key)
    grammars.set(key, p)
    return await p
  }
  p = compile(format)
  grammars.set(key, p)
  p.catch(() => grammars.delete(key))
  if (grammars.size > CACHE) grammars.delete(grammars.keys().next().value!)
  return await p
}

/** Biases for one model: `close` favours finishing the document, `none` changes nothing. Built once per model. */
export function windDownBiases (model: LlamaModel): { close: TokenBias, none: TokenBias } {
  let b = biases.get(model)
  if (b !== undefined) return b
  const close = new TokenBias(model.tokenizer)
  const meta = model.fileInfo.metadata as unknown as { tokenizer?: { ggml?: { tokens?: unknown[] } } }
  const n = meta.tokenizer?.ggml?.tokens?.length ?? 0
  for (let t = 0; t < n; t++) {
    const text = model.detokenize([t as Token], false)
    if (text === '') continue
    if (/^[}\]][\s}\]"]*$/.test(text)) close.set(t as Token, { logit: 30 })
    else if (/^"[\s}\]"]*$/.test(text)) close.set(t as Token, { logit: 15 })
    else if (/^\s+$/.test(text)) close.set(t as Token, { logit: -15 })
  }
  b = { close, none: new TokenBias(model.tokenizer) }
  biases.set(model, b)
  return b
}

/** Tokens kept in reserve to close the document: enough for about ten nesting levels. */
export function windDownReserve (budget: number): number {
  return Math.min(48, Math.floor(budget / 4))
}
