// Checks a `format` JSON Schema before it reaches the grammar compiler, and
// rewrites it into the subset node-llama-cpp compiles (its GbnfJsonSchema).
// The promise of structured output is that the reply matches the schema, so a
// keyword that constrains values but that the grammar cannot enforce
// (pattern, minimum, ...) is refused with a 400 naming it, rather than
// silently ignored. Annotations (title, description, default, examples, ...)
// and unknown `format`s (an annotation in JSON Schema 2020-12) are dropped.
// `anyOf` becomes `oneOf` (the grammar alternates either way; any instance
// produced matches at least one branch, which is exactly anyOf), and the old
// `definitions` become `$defs`.

const SUPPORTED = new Set([
  'type', 'const', 'enum', 'oneOf', 'anyOf', 'properties', 'required', 'additionalProperties', 'minProperties',
  'maxProperties', 'items', 'prefixItems', 'minItems', 'maxItems', 'minLength', 'maxLength', 'format', '$defs',
  'definitions', '$ref',
])
const ANNOTATIONS = new Set([
  'title', 'description', 'default', 'examples', '$schema', '$id', '$comment', 'deprecated', 'readOnly', 'writeOnly',
  '$anchor', 'contentMediaType', 'contentEncoding',
])
const FORMATS = new Set(['date-time', 'time', 'date'])
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'])
const MAX_DEPTH = 32

type Json = null | boolean | number | string | Json[] | { [k: string]: Json }
export type Schema = { [k: string]: Json }

/** The cleaned schema, or an error message naming the offending keyword and where it is; `field`: where the schema came from. */
export function checkSchema (schema: Schema, field = 'format'): { schema: Schema } | { error: string } {
  try {
    const defs = schema.$defs ?? schema.definitions
    const names = new Set(isObject(defs) ? Object.keys(defs) : [])
    return { schema: clean(schema, '$', 0, names) as Schema }
  } catch (e) {
    return { error: `invalid JSON schema in ${field} ${(e as Error).message}` }
  }
}

function fail (where: string, what: string): never {
  throw new Error(`at ${where}: ${what}`)
}

const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v)

function clean (s: Json, where: string, depth: number, defs: ReadonlySet<string>): Json {
  if (depth > MAX_DEPTH) fail(where, `nested deeper than ${MAX_DEPTH}`)
  if (typeof s === 'boolean') return s
  if (!isObject(s)) fail(where, 'expected a schema object')
  const out: Schema = {}
  for (const [k, v] of Object.entries(s)) {
    const at = `${where}.${k}`
    if (ANNOTATIONS.has(k)) continue
    if (!SUPPORTED.has(k)) fail(where, `keyword "${k}" is not supported (the grammar cannot enforce it)`)
    switch (k) {
      case 'type': {
        const list = Array.isArray(v) ? v : [v]
        if (list.length === 0 || list.some((t) => typeof t !== 'string' || !TYPES.has(t))) fail(at, 'unknown type')
        out.type = v
        break
      }
      case 'format':
        if (typeof v === 'string' && FORMATS.has(v)) out.format = v
        break
      case 'const': case 'required':
        out[k] = v
        break
      case 'enum':
        if (!Array.isArray(v) || v.length === 0) fail(at, 'expected a non-empty array')
        out.enum = v
        break
      case 'oneOf': case 'anyOf': {
        if (!Array.isArray(v) || v.length === 0) fail(at, 'expected a non-empty array of schemas')
        out.oneOf = v.map((x, i) => clean(x, `${at}[${i}]`, depth + 1, defs))
        break
      }
      case 'prefixItems':
        if (!Array.isArray(v)) fail(at, 'expected an array of schemas')
        out.prefixItems = v.map((x, i) => clean(x, `${at}[${i}]`, depth + 1, defs))
        break
      case 'items': case 'additionalProperties':
        out[k] = clean(v, at, depth + 1, defs)
        break
      case 'properties': case '$defs': case 'definitions': {
        if (!isObject(v)) fail(at, 'expected an object of schemas')
        const o: Schema = {}
        for (const [name, sub] of Object.entries(v)) o[name] = clean(sub, `${at}.${name}`, depth + 1, defs)
        out[k === 'definitions' ? '$defs' : k] = o
        break
      }
      case '$ref':
        if (typeof v !== 'string' || !/^#\/(\$defs|definitions)\/[^/]+$/.test(v)) fail(at, 'only local "#/$defs/Name" references are supported')
        if (!defs.has(v.slice(v.lastIndexOf('/') + 1))) fail(at, `reference ${JSON.stringify(v)} names no definition`)
        out.$ref = v.replace('#/definitions/', '#/$defs/')
        break
      default: // minLength, maxLength, minItems, maxItems, minProperties, maxProperties
        if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) fail(at, 'expected a non-negative integer')
        out[k] = v
    }
  }
  return out
}
