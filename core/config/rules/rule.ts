// Router rules in Traefik v3's syntax, parsed and compiled once per
// configuration: matchers Host, HostRegexp, Path, PathPrefix, PathRegexp,
// Method, Header, HeaderRegexp, Query, QueryRegexp and ClientIP, combined with
// `!`, `&&` (binds tighter), `||` and parentheses. Values are Go string
// literals: `raw` in backticks, or "quoted" with Go's escapes. Matcher names
// may be written as Traefik accepts them: Host, host, HOST.
//
// The result is plain data (regexps as DFA tables, regexp-dfa.ts), frozen with
// the config and sent to the workers, which turn it into closures
// (core/worker/request/router.ts) without compiling anything again.
import { type Dfa, compileRegexp } from './regexp-dfa.js'
import { ReSyntaxError } from './regexp-syntax.js'
import { ValueError, checkClientIp, checkHeaderName, checkHostValue, checkPathValue, checkRegexpValue } from './rule-values.js'

export type Rule =
  /** lower-case names without the trailing dot; "*.example.com" (one label) and "**.example.com" (one or more) are wildcards */
  | { readonly op: 'host', readonly values: readonly string[] }
  | { readonly op: 'hostRegexp', readonly re: Dfa }
  | { readonly op: 'path' | 'pathPrefix', readonly values: readonly string[] }
  | { readonly op: 'pathRegexp', readonly re: Dfa }
  /** upper-case, as Traefik compares them */
  | { readonly op: 'method', readonly values: readonly string[] }
  /** name in lower case (ctx.headers' names are) */
  | { readonly op: 'header', readonly name: string, readonly value: string }
  | { readonly op: 'headerRegexp', readonly name: string, readonly re: Dfa }
  /** Query(`k`) is Query(`k`, ``): the parameter present with an empty value, as Traefik */
  | { readonly op: 'query', readonly key: string, readonly value: string }
  | { readonly op: 'queryRegexp', readonly key: string, readonly re: Dfa }
  /** addresses and CIDRs as written (checked) */
  | { readonly op: 'clientIP', readonly cidrs: readonly string[] }
  | { readonly op: 'not', readonly rule: Rule }
  | { readonly op: 'and' | 'or', readonly left: Rule, readonly right: Rule }

/** Traefik's matchers: their parameter counts (Host, Path, PathPrefix and Method also take several values in lb, as before v3). */
const ARITY: Record<string, [number, number]> = {
  Host: [1, 64], HostRegexp: [1, 1], Path: [1, 64], PathPrefix: [1, 64], PathRegexp: [1, 1], Method: [1, 64],
  Header: [2, 2], HeaderRegexp: [2, 2], Query: [1, 2], QueryRegexp: [1, 2], ClientIP: [1, 64],
}
const NAMES = Object.keys(ARITY)
/** Every spelling Traefik takes (pkg/rules/parser.go): as written, lower case, upper case, and Title case. */
const SPELLINGS = new Map<string, string>()
for (const n of NAMES) for (const s of [n, n.toLowerCase(), n.toUpperCase(), n[0] + n.slice(1).toLowerCase()]) SPELLINGS.set(s, n)

const MAX_DEPTH = 100

/** Parses and compiles a rule; throws an Error whose message says where (the column), what was expected and what was found. */
export function parseRule (src: string): Rule {
  let i = 0
  let depth = 0
  const fail = (what: string, at = i): never => {
    throw new Error(`column ${at + 1} of rule ${JSON.stringify(src)}: ${what}`)
  }
  const found = (): string => {
    if (i >= src.length) return 'the end of the rule'
    const word = /^([A-Za-z_]\w*|&&|\|\||.)/.exec(src.slice(i))![0]
    return JSON.stringify(word)
  }
  const ws = (): void => { while (i < src.length && ' \t\r\n'.includes(src[i]!)) i++ }

  /** A Go string literal at i. */
  const literal = (): string => {
    const q = src[i]
    if (q === '`') {
      const end = src.indexOf('`', i + 1)
      if (end < 0) fail('unterminated `value`: expected a closing backtick')
      const v = src.slice(i + 1, end)
      i = end + 1
      return v
    }
    if (q !== '"') return fail(`expected a value in backticks or double quotes, found ${found()}${q === "'" ? ' (single quotes are not Go strings)' : ''}`)
    let v = ''
    for (let j = i + 1; ; j++) {
      const c = src[j]
      if (c === undefined || c === '\n') return fail('unterminated "value": expected a closing double quote')
      if (c === '"') { i = j + 1; return v }
      if (c !== '\\') { v += c; continue }
      const e = src[++j]
      const simple: Record<string, string> = { n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\', a: '\x07', b: '\b', f: '\f', v: '\v' }
      if (e !== undefined && simple[e] !== undefined) { v += simple[e]; continue }
      const hex = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0
      const digits = src.slice(j + 1, j + 1 + hex)
      if (hex > 0 && digits.length === hex && /^[0-9A-Fa-f]+$/.test(digits)) {
        v += String.fromCodePoint(parseInt(digits, 16))
        j += hex
        continue
      }
      return fail(`unknown escape sequence \\${e ?? ''} in a double-quoted value (write the value in backticks to keep backslashes as they are)`, j - 1)
    }
  }

  const matcher = (): Rule => {
    const at = i
    const m = /^[A-Za-z_]\w*/.exec(src.slice(i))
    if (m === null) return fail(`expected a matcher (${NAMES.join(', ')}), "!" or "(", found ${found()}`)
    const name = SPELLINGS.get(m[0])
    if (name === undefined) {
      const hint = m[0] === 'HostSNI' || m[0] === 'HostSNIRegexp' ? ' (HostSNI is for TCP routers)' : ''
      return fail(`unknown matcher ${m[0]}${hint}: expected one of ${NAMES.join(', ')}`)
    }
    i += m[0].length
    ws()
    if (src[i] !== '(') fail(`expected "(" after ${name}, found ${found()}`)
    i++
    const args: Array<{ v: string, at: number }> = []
    for (;;) {
      ws()
      if (src[i] === ')' && args.length > 0) break // a trailing comma, as Go allows
      const vat = i
      args.push({ v: literal(), at: vat })
      ws()
      if (src[i] === ',') { i++; continue }
      if (src[i] === ')') break
      fail(`expected "," or ")" after a value of ${name}, found ${found()}`)
    }
    i++
    const [min, max] = ARITY[name]!
    if (args.length < min || args.length > max) {
      fail(`${name} takes ${min === max ? min : `${min} to ${max === 64 ? 'several' : max}`} value${max > 1 ? 's' : ''}, found ${args.length}`, at)
    }
    try {
      return build(name, args.map((a) => a.v))
    } catch (err) {
      if (!(err instanceof ValueError)) throw err
      const a = args[err.arg]!
      return fail(`${name} value ${JSON.stringify(a.v)}: ${err.message}`, a.at + 1 + err.offset)
    }
  }

  const unary = (): Rule => {
    ws()
    if (src[i] === '!') {
      i++
      return { op: 'not', rule: unary() }
    }
    if (src[i] === '(') {
      const open = i++
      if (++depth > MAX_DEPTH) fail(`parentheses nested deeper than ${MAX_DEPTH}`)
      const r = or()
      depth--
      ws()
      if (src[i] !== ')') fail(`expected ")" to close the "(" at column ${open + 1}, found ${found()}`)
      i++
      return r
    }
    return matcher()
  }
  const and = (): Rule => {
    let left = unary()
    for (;;) {
      ws()
      if (!src.startsWith('&&', i)) return left
      i += 2
      left = { op: 'and', left, right: unary() }
    }
  }
  const or = (): Rule => {
    let left = and()
    for (;;) {
      ws()
      if (!src.startsWith('||', i)) return left
      i += 2
      left = { op: 'or', left, right: and() }
    }
  }
  const rule = or()
  ws()
  if (i < src.length) fail(`expected "&&", "||" or the end of the rule, found ${found()}`)
  return rule
}

function regexp (v: string, arg: number): Dfa {
  try {
    return compileRegexp(v)
  } catch (err) {
    if (err instanceof ReSyntaxError) throw new ValueError(`invalid regexp: ${err.message}`, arg, err.pos)
    throw new ValueError((err as Error).message, arg)
  }
}

function build (name: string, v: string[]): Rule {
  switch (name) {
    case 'Host': return { op: 'host', values: v.map((h, n) => checkHostValue(h, n)) }
    case 'HostRegexp': return { op: 'hostRegexp', re: regexp(checkRegexpValue(v[0]!, 0, 'host'), 0) }
    case 'Path': return { op: 'path', values: v.map((p, n) => checkPathValue(p, n)) }
    case 'PathPrefix': return { op: 'pathPrefix', values: v.map((p, n) => checkPathValue(p, n)) }
    case 'PathRegexp': return { op: 'pathRegexp', re: regexp(checkRegexpValue(v[0]!, 0, 'path'), 0) }
    case 'Method': return { op: 'method', values: v.map((m) => m.toUpperCase()) }
    case 'Header': return { op: 'header', name: checkHeaderName(v[0]!), value: v[1]! }
    case 'HeaderRegexp': return { op: 'headerRegexp', name: checkHeaderName(v[0]!), re: regexp(v[1]!, 1) }
    case 'Query': return { op: 'query', key: v[0]!, value: v[1] ?? '' }
    case 'QueryRegexp': return v.length === 1 ? { op: 'query', key: v[0]!, value: '' } : { op: 'queryRegexp', key: v[0]!, re: regexp(v[1]!, 1) }
    default: return { op: 'clientIP', cidrs: v.map((c, n) => checkClientIp(c, n)) }
  }
}

/** The Host() values of a rule that are not under a negation (Traefik's ParseDomains): the names a certificate covers. */
export function positiveHosts (r: Rule, out: string[] = []): string[] {
  if (r.op === 'host') out.push(...r.values)
  else if (r.op === 'and' || r.op === 'or') {
    positiveHosts(r.left, out)
    positiveHosts(r.right, out)
  }
  return out
}

/**
 * Traefik's default priority (pkg/muxer/http/mux.go GetRulePriority): the
 * length of the rule in bytes (Go's len), less 2 for each "**." wildcard host (so that it ranks
 * below the single-label wildcard and the exact hosts it covers).
 */
export function rulePriority (rule: string, r: Rule): number {
  return Buffer.byteLength(rule) - 2 * positiveHosts(r).filter((h) => h.startsWith('**.')).length
}
