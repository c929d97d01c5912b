// The shortest text that completes a partial JSON document so that it parses
// and matches its schema: what a formatted reply cut by its token budget gets
// appended (local/runner/generate.ts), so that with `format` a reply is always valid.
//
// The text fed in is a prefix the grammar allowed, i.e. the start of some
// document that matches the schema (schema.ts restricts schemas to what the
// grammar enforces). Parsing it keeps a stack of frames, each with the schemas
// its value may still match (`alts`: oneOf branches, type lists and $refs
// flattened, narrowed as the value shows its type and its keys); the closing
// finishes the innermost frame with the shortest value each alternative
// allows, then every enclosing one (missing required properties, minItems).
// Cost: O(1) per character fed, O(depth + schema size) per closing().

import type { Format } from '../local/protocol.js'

type S = { readonly [k: string]: unknown }
type Kind = 'object' | 'array' | 'string' | 'number' | 'integer' | 'boolean' | 'null'
const KINDS: readonly Kind[] = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']

type Frame =
  | { k: 'value', alts: S[] }
  | { k: 'obj', alts: S[], keys: string[], st: 'open' | 'comma' | 'colon' | 'after' }
  | { k: 'arr', alts: S[], n: number, st: 'open' | 'comma' | 'after' }
  /** text: raw (escaped) content; n: characters it decodes to (escapes in progress aside); esc: 0 none, 1 after "\", 2..5 inside "\u" with esc - 2 hex digits. */
  | { k: 'str', alts: S[], key: boolean, text: string, n: number, esc: number }
  | { k: 'num', alts: S[], text: string }
  | { k: 'lit', alts: S[], text: string }

/** Templates of the string formats the grammar knows; a partial one is completed from the candidate tails, first valid wins. */
const FORMATS: Record<string, { template: string, valid: RegExp }> = {
  date: { template: '2000-01-01', valid: /^\d{4}-\d{2}-\d{2}$/ },
  time: { template: '00:00:00Z', valid: /^\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/ },
  'date-time': { template: '2000-01-01T00:00:00Z', valid: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/ },
}
const FORMAT_TAILS = ['', 'Z', '0Z', '00Z', '0:00', '00:00', '0', '00', ':00Z', '00:00Z']
const MAX_DEPTH = 24

const isWs = (c: string): boolean => c === ' ' || c === '\n' || c === '\t' || c === '\r'
const shortestOf = (xs: Iterable<string>, none = 'null'): string => {
  let best: string | null = null
  for (const x of xs) if (best === null || x.length < best.length) best = x
  return best ?? none
}
/** A key's raw (escaped) text decoded; null while it ends inside an escape. */
const decodeKey = (raw: string): string | null => {
  try { return JSON.parse(`"${raw}"`) as string } catch { return null }
}

export class JsonCloser {
  private readonly root: S
  private stack: Frame[]

  constructor (format: Format) {
    this.root = format === 'json' ? { type: 'object' } : format as S
    this.stack = [{ k: 'value', alts: this.alts(this.root, 0) }]
  }

  /** The document is complete (nothing to add). */
  get complete (): boolean { return this.stack.length === 0 }

  push (text: string): void {
    for (const c of text) this.char(c)
  }

  /** The shortest text that makes what was pushed a complete document matching the schema ("" when complete). */
  closing (): string {
    let out = ''
    for (let i = this.stack.length - 1; i >= 0; i--) out += this.finish(this.stack[i]!, this.stack[i + 1])
    return out
  }

  // ---- schemas ----

  private resolve (s: unknown): S | null {
    if (s === true || s === undefined) return {}
    if (s === false || typeof s !== 'object' || s === null) return null
    const ref = (s as S).$ref
    if (typeof ref !== 'string') return s as S
    const defs = (this.root.$defs ?? {}) as Record<string, unknown>
    return this.resolve(defs[ref.slice(ref.lastIndexOf('/') + 1)])
  }

  /** The alternatives a value of schema `s` may match, each with at most one type. */
  private alts (s: unknown, depth: number): S[] {
    const r = this.resolve(s)
    if (r === null || depth > MAX_DEPTH) return []
    if (Array.isArray(r.oneOf)) return r.oneOf.flatMap((b) => this.alts(b, depth + 1))
    if (Array.isArray(r.type)) return (r.type as unknown[]).map((t) => ({ ...r, type: t }))
    return [r]
  }

  private kinds (s: S): readonly Kind[] {
    const values = 'const' in s ? [s.const] : Array.isArray(s.enum) ? s.enum : null
    if (values !== null) return [...new Set(values.map(kindOf))]
    if (typeof s.type === 'string') return s.type === 'number' ? ['number', 'integer'] : [s.type as Kind]
    return KINDS
  }

  private narrow (alts: S[], ...kinds: Kind[]): S[] {
    const ok = alts.filter((a) => this.kinds(a).some((k) => kinds.includes(k)))
    return ok.length > 0 ? ok : alts
  }

  private propSchema (alts: readonly S[], key: string): S[] {
    const out: S[] = []
    for (const a of alts) {
      const props = (a.properties ?? {}) as Record<string, unknown>
      out.push(...this.alts(Object.hasOwn(props, key) ? props[key] : a.additionalProperties, 0))
    }
    return out.length > 0 ? out : [{}]
  }

  private itemSchema (alts: readonly S[], i: number): S[] {
    const out: S[] = []
    for (const a of alts) {
      const pre = Array.isArray(a.prefixItems) ? a.prefixItems : []
      out.push(...this.alts(i < pre.length ? pre[i] : a.items, 0))
    }
    return out.length > 0 ? out : [{}]
  }

  /** The shortest JSON text a value of one of `alts` can be. */
  private shortest (alts: readonly S[], depth = 0): string {
    if (depth > MAX_DEPTH) return 'null'
    return shortestOf(alts.map((a) => this.shortestOne(a, depth)))
  }

  private shortestOne (s: S, depth: number): string {
    if ('const' in s) return JSON.stringify(s.const)
    if (Array.isArray(s.enum)) return shortestOf(s.enum.map((v) => JSON.stringify(v)))
    return shortestOf(this.kinds(s).map((k) => {
      switch (k) {
        case 'null': return 'null'
        case 'boolean': return 'true'
        case 'number': case 'integer': return '0'
        case 'string': return '"' + this.closeString(s, '', 0)
        case 'array': return `[${this.items(s, 0, Number(s.minItems ?? 0), depth)}]`
        case 'object': return `{${this.props(s, [], false, depth)}}`
      }
      return 'null'
    }))
  }

  /** Items n .. min-1 (with their commas; a leading one when n > 0). */
  private items (s: S, n: number, min: number, depth: number): string {
    let out = ''
    for (let i = n; i < min; i++) out += (i > 0 ? ',' : '') + this.shortest(this.itemSchema([s], i), depth + 1)
    return out
  }

  /** The properties an object of `s` that has `keys` still needs (required ones, then up to minProperties). */
  private props (s: S, keys: readonly string[], comma: boolean, depth: number): string {
    const have = new Set(keys)
    const need: string[] = (Array.isArray(s.required) ? s.required as string[] : []).filter((k) => !have.has(k))
    const declared = Object.keys((s.properties ?? {}) as object).filter((k) => !have.has(k) && !need.includes(k))
    let extra = 0
    while (have.size + need.length < Number(s.minProperties ?? 0)) {
      need.push(declared.length > 0 ? declared.shift()! : `k${extra++}`)
    }
    let out = ''
    for (const k of need) {
      out += (comma ? ',' : '') + JSON.stringify(k) + ':' + this.shortest(this.propSchema([s], k), depth + 1)
      comma = true
    }
    return out
  }

  /** The rest of a string value (after `text`, its raw content so far, `chars` characters once decoded), closing quote included. */
  private closeString (s: S, text: string, chars: number): string {
    const values = 'const' in s ? [s.const] : Array.isArray(s.enum) ? s.enum : null
    if (values !== null) {
      const raw = values.filter((v): v is string => typeof v === 'string').map((v) => JSON.stringify(v).slice(1))
      return shortestOf(raw.filter((r) => r.startsWith(text)).map((r) => r.slice(text.length)), '"')
    }
    const f = typeof s.format === 'string' ? FORMATS[s.format] : undefined
    if (f !== undefined) {
      const cands = [f.template.slice(Math.min(text.length, f.template.length)), ...FORMAT_TAILS]
      return (cands.find((t) => f.valid.test(text + t)) ?? '') + '"'
    }
    const min = Number(s.minLength ?? 0)
    return (chars < min ? 'a'.repeat(min - chars) : '') + '"'
  }

  // ---- closing ----

  /** What ends frame `f`, once its child (the frame above it, if any) is ended. */
  private finish (f: Frame, child: Frame | undefined): string {
    switch (f.k) {
      case 'value': return this.shortest(f.alts)
      case 'num': return /[-+eE.]$/.test(f.text) ? '0' : ''
      case 'lit': return shortestOf(['true', 'false', 'null'].filter((l) => l.startsWith(f.text)).map((l) => l.slice(f.text.length)))
      case 'str': {
        // An escape in progress ends as "\n" or "\u0000"; a key is ended by its object (finishObject).
        const esc = f.esc === 1 ? 'n' : f.esc >= 2 ? '0'.repeat(6 - f.esc) : ''
        if (f.key) return esc
        return esc + shortestOf(f.alts.map((a) => this.closeString(a, f.text + esc, f.n + (f.esc > 0 ? 1 : 0))), '"')
      }
      case 'arr': return shortestOf(f.alts.map((a) => {
        const min = Number(a.minItems ?? 0)
        if (f.st === 'comma') return this.shortest(this.itemSchema([a], f.n)) + this.items(a, f.n + 1, min, 0) + ']'
        return this.items(a, f.n, min, 0) + ']'
      }))
      case 'obj': return shortestOf(f.alts.map((a) => this.finishObject(a, f, child)))
    }
  }

  private finishObject (a: S, f: Extract<Frame, { k: 'obj' }>, child: Frame | undefined): string {
    const value = (key: string, keys: readonly string[]): string => this.shortest(this.propSchema([a], key)) + this.props(a, keys, true, 0) + '}'
    if (child !== undefined && child.k === 'str' && child.key) {
      // A key is being written: end it as a declared property it can still become, or as it is where the schema allows other keys.
      const text = child.text
      const options: string[] = []
      for (const k of Object.keys((a.properties ?? {}) as object)) {
        const raw = JSON.stringify(k).slice(1, -1)
        if (!f.keys.includes(k) && raw.startsWith(text)) options.push(raw.slice(text.length) + '":' + value(k, [...f.keys, k]))
      }
      const asIs = decodeKey(text)
      if (a.additionalProperties !== false && asIs !== null) options.push('":' + value(asIs, [...f.keys, asIs]))
      return shortestOf(options, '":null}')
    }
    if (child === undefined && f.st === 'colon') return ':' + value(f.keys[f.keys.length - 1]!, f.keys)
    if (child === undefined && f.st === 'comma') {
      const rest = this.props(a, f.keys, false, 0)
      if (rest !== '') return rest + '}'
      const free = Object.keys((a.properties ?? {}) as object).filter((k) => !f.keys.includes(k))
      const k = free[0] ?? ''
      return JSON.stringify(k) + ':' + value(k, [...f.keys, k])
    }
    return this.props(a, f.keys, f.st === 'after', 0) + '}'
  }

  // ---- parsing ----

  private char (c: string): void {
    const f = this.stack[this.stack.length - 1]
    if (f === undefined) return
    switch (f.k) {
      case 'str': return this.strChar(f, c)
      case 'num': case 'lit':
        if (f.k === 'num' ? /[0-9.eE+-]/.test(c) : /[a-z]/.test(c)) { f.text += c; return }
        this.stack.pop()
        return this.char(c)
      case 'value': return this.valueStart(f.alts, c, true)
      case 'obj':
        if (isWs(c)) return
        if (c === '}' && f.st !== 'comma' && f.st !== 'colon') { this.stack.pop(); return }
        if (c === ',' && f.st === 'after') { f.st = 'comma'; return }
        if (c === '"' && (f.st === 'open' || f.st === 'comma')) { this.stack.push({ k: 'str', alts: [], key: true, text: '', n: 0, esc: 0 }); return }
        if (c === ':' && f.st === 'colon') {
          f.st = 'after'
          this.stack.push({ k: 'value', alts: this.propSchema(f.alts, f.keys[f.keys.length - 1]!) })
        }
        return
      case 'arr':
        if (isWs(c)) return
        if (c === ']' && f.st !== 'comma') { this.stack.pop(); return }
        if (c === ',' && f.st === 'after') { f.st = 'comma'; return }
        if (f.st === 'open' || f.st === 'comma') {
          const alts = this.itemSchema(f.alts, f.n)
          f.n++
          f.st = 'after'
          this.valueStart(alts, c, false)
        }
    }
  }

  /** A value begins with `c` (or `c` is white space before it); `replace`: the top frame is the 'value' frame it replaces. */
  private valueStart (alts: S[], c: string, replace: boolean): void {
    if (isWs(c)) {
      if (!replace) this.stack.push({ k: 'value', alts })
      return
    }
    let f: Frame | null = null
    if (c === '{') f = { k: 'obj', alts: this.narrow(alts, 'object'), keys: [], st: 'open' }
    else if (c === '[') f = { k: 'arr', alts: this.narrow(alts, 'array'), n: 0, st: 'open' }
    else if (c === '"') f = { k: 'str', alts: this.narrow(alts, 'string'), key: false, text: '', n: 0, esc: 0 }
    else if (c === '-' || (c >= '0' && c <= '9')) f = { k: 'num', alts: this.narrow(alts, 'number', 'integer'), text: c }
    else if (c === 't' || c === 'f' || c === 'n') f = { k: 'lit', alts: this.narrow(alts, c === 'n' ? 'null' : 'boolean'), text: c }
    if (replace) this.stack.pop()
    if (f !== null) this.stack.push(f)
  }

  private strChar (f: Extract<Frame, { k: 'str' }>, c: string): void {
    if (f.esc === 1) {
      f.esc = c === 'u' ? 2 : 0
      if (f.esc === 0) f.n++
    } else if (f.esc >= 2) {
      f.esc = f.esc === 5 ? 0 : f.esc + 1
      if (f.esc === 0) f.n++
    } else if (c === '\\') {
      f.esc = 1
    } else if (c === '"') {
      this.stack.pop()
      if (f.key) {
        const o = this.stack[this.stack.length - 1]
        if (o !== undefined && o.k === 'obj') {
          o.keys.push(JSON.parse(`"${f.text}"`) as string)
          o.st = 'colon'
        }
      }
      return
    } else {
      f.n++
    }
    f.text += c
  }
}

function kindOf (v: unknown): Kind {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'array'
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number'
  return typeof v as Kind
}
