// A key's model allow-list. A pattern names models as a client does: "stories"
// is every tag of stories ("stories:latest", "stories:q8"), "qwen2.5:7b" that
// one tag, and "*" stands for any run of characters ("qwen*" is every qwen
// model, "*" everything). Patterns compile once, at start-up, to one regular
// expression per key; a model name is matched in its canonical "name:tag" form.

const ESCAPE = /[.+?^${}()|[\]\\]/g

/** A pattern as the config writes it: printable, no blanks, at most 200 characters. */
export const MODEL_PATTERN = /^[^\s\p{Cc}]{1,200}$/u

function source (pattern: string): string {
  const body = pattern.replace(ESCAPE, '\\$&').replaceAll('*', '.*')
  return pattern.includes(':') ? body : `${body}(?::.*)?`
}

/** A test of canonical model names against `patterns`; null when there are none (every model allowed). */
export function compileModels (patterns: readonly string[]): ((model: string) => boolean) | null {
  if (patterns.length === 0) return null
  const re = new RegExp(`^(?:${patterns.map(source).join('|')})$`)
  return (model) => re.test(model)
}
