// Structured output: `format` -> a grammar that constrains sampling. The
// grammar guarantees every prefix can still become a valid document, not that
// it ends in time: format-budget.ts makes it end within the token budget.

import type { LlamaGrammar } from 'node-llama-cpp'
import { llama } from './model-host.js'
import { statusError, type Format } from '../protocol.js'

const CACHE = 32
const grammars = new Map<string, Promise<LlamaGrammar>>()

// node-llama-cpp's integer rule allows an exponent ("-5e-20"), which is not an
// integer; replace it with plain integers so replies match `"type": "integer"`.
const INTEGER_RULE = /^integer-number-rule ::= .*$/m
const INTEGER_FIXED = 'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15})'
const ROOT = /^root ::= /m
// An optional format (a tool call the model may make): the document, or text whose first character is not "{".
const OPTIONAL_ROOT = 'root ::= lb-document | lb-text\nlb-text ::= [^{] [^\\x00]*\n'

async function compile (format: Format, optional: boolean): Promise<LlamaGrammar> {
  if (format === 'json' && !optional) return await llama.getGrammarFor('json')
  if (format === 'json') format = { type: 'object' }
  let g: LlamaGrammar
  try {
    // The schema was checked and reduced to node-llama-cpp's subset by structured/schema.ts.
    g = await llama.createGrammarForJsonSchema(format as unknown as Parameters<typeof llama.createGrammarForJsonSchema>[0])
  } catch (e) {
    throw statusError(400, `invalid JSON schema in format: ${(e as Error).message}`)
  }
  if (!INTEGER_RULE.test(g.grammar) && !optional) return g
  const text = g.grammar.replace(INTEGER_RULE, INTEGER_FIXED)
  return await llama.createGrammar({
    grammar: optional ? OPTIONAL_ROOT + text.replace(ROOT, 'lb-document ::= ') : text,
    stopGenerationTriggers: g.stopGenerationTriggers,
    trimWhitespaceSuffix: g.trimWhitespaceSuffix,
  })
}

/** The grammar for a format (`optional`: or text that does not start with "{"), compiled once per worker (small LRU). */
export async function grammarFor (format: Format, optional = false): Promise<LlamaGrammar> {
  const key = (optional ? '?' : '') + (format === 'json' ? 'json' : JSON.stringify(format))
  let p = grammars.get(key)
  if (p !== undefined) {
    grammars.delete(key)
    grammars.set(key, p)
    return await p
  }
  p = compile(format, optional)
  grammars.set(key, p)
  p.catch(() => grammars.delete(key))
  if (grammars.size > CACHE) grammars.delete(grammars.keys().next().value!)
  return await p
}
