// The regular expressions of router rules (HostRegexp, PathRegexp,
// HeaderRegexp, QueryRegexp), in Go's RE2 syntax as Traefik takes them, parsed
// into a small tree that regexp-dfa.ts turns into a deterministic automaton.
//
// Why an automaton of our own rather than JavaScript's RegExp: V8's engine
// backtracks, so one pattern such as `^(a+)+$` can hold a worker for seconds on
// a 30-byte path, and no static check finds every such pattern. A DFA runs in
// one table step per character whatever the pattern, allocates nothing while
// matching, and reads a path or a query value in place (percent-decoding as it
// goes). RE2 has no backreferences or lookaround precisely so that this is
// possible. What is accepted (everything else is refused with the reason):
//   - literals, `.`, `[...]` classes with ranges and negation, `[[:alpha:]]`
//     ASCII classes, `\d \D \s \S \w \W` (ASCII, as RE2), `\pX` is refused;
//   - escapes `\t \n \r \f \v \a \xHH \x{H...} \0oo` (octal), `\Q...\E`, and
//     any escaped punctuation;
//   - `^ $ \A \z \b \B`; groups `(re)`, `(?:re)`, `(?P<name>re)`,
//     `(?<name>re)`; flags `(?imsU)`, `(?i:re)`, `(?-i)`;
//   - `* + ? {n} {n,} {n,m}` (counts up to 1000, as RE2), greedy or lazy (`*?`:
//     the same language, so the same match for a yes/no question).
// Semantics are Go's: a pattern matches anywhere in the text unless anchored;
// `$` without (?m) is the end of the text only; (?i) folds ASCII and the
// simple Unicode case pairs.

/** Sorted, disjoint, inclusive code point ranges: [lo0, hi0, lo1, hi1, ...]. */
export type Ranges = number[]

export type Assertion = 'bot' | 'eot' | 'bol' | 'eol' | 'wb' | 'nwb'

export type ReNode =
  | { readonly t: 'set', readonly r: Ranges }
  | { readonly t: 'cat', readonly xs: readonly ReNode[] }
  | { readonly t: 'alt', readonly xs: readonly ReNode[] }
  | { readonly t: 'rep', readonly x: ReNode, readonly min: number, readonly max: number } // max -1: no bound
  | { readonly t: 'assert', readonly k: Assertion }

const MAX_CP = 0x10ffff
const MAX_REPEAT = 1000 // RE2's limit on a counted repetition

/** A syntax error at `pos` (0-based, in code units of the pattern). */
export class ReSyntaxError extends Error {
  readonly pos: number
  constructor (message: string, pos: number) {
    super(message)
    this.pos = pos
  }
}

// --- ranges

export function normalize (r: Ranges): Ranges {
  const pairs: Array<[number, number]> = []
  for (let i = 0; i < r.length; i += 2) pairs.push([r[i]!, r[i + 1]!])
  pairs.sort((a, b) => a[0] - b[0])
  const out: Ranges = []
  for (const [lo, hi] of pairs) {
    const n = out.length
    if (n > 0 && lo <= out[n - 1]! + 1) out[n - 1] = Math.max(out[n - 1]!, hi)
    else out.push(lo, hi)
  }
  return out
}

export function negate (r: Ranges): Ranges {
  const n = normalize(r)
  const out: Ranges = []
  let next = 0
  for (let i = 0; i < n.length; i += 2) {
    if (n[i]! > next) out.push(next, n[i]! - 1)
    next = n[i + 1]! + 1
  }
  if (next <= MAX_CP) out.push(next, MAX_CP)
  return out
}

/** Adds the other case of every character (ASCII, the simple Unicode pairs, and RE2's K/k/U+212A and S/s/U+017F). */
function fold (r: Ranges): Ranges {
  const out = [...r]
  for (let i = 0; i < r.length; i += 2) {
    const lo = r[i]!
    const hi = r[i + 1]!
    if (hi - lo > 0x3000) continue // a class this wide (\W, [^a], .) already holds nearly all of its other cases
    for (let c = lo; c <= hi; c++) {
      const ch = String.fromCodePoint(c)
      for (const o of [ch.toLowerCase(), ch.toUpperCase()]) {
        const oc = o.codePointAt(0)!
        if (o.length === String.fromCodePoint(oc).length && oc !== c) out.push(oc, oc)
      }
      if (c === 0x6b || c === 0x4b) out.push(0x212a, 0x212a)
      if (c === 0x212a) out.push(0x6b, 0x6b, 0x4b, 0x4b)
      if (c === 0x73 || c === 0x53) out.push(0x17f, 0x17f)
      if (c === 0x17f) out.push(0x73, 0x73, 0x53, 0x53)
    }
  }
  return normalize(out)
}

const DIGIT: Ranges = [0x30, 0x39]
const SPACE: Ranges = [0x09, 0x0a, 0x0c, 0x0d, 0x20, 0x20] // RE2's \s: [\t\n\f\r ]
const WORD: Ranges = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a]
const PERL: Record<string, Ranges> = { d: DIGIT, s: SPACE, w: WORD }
const POSIX: Record<string, Ranges> = {
  alnum: [0x30, 0x39, 0x41, 0x5a, 0x61, 0x7a],
  alpha: [0x41, 0x5a, 0x61, 0x7a],
  ascii: [0, 0x7f],
  blank: [0x09, 0x09, 0x20, 0x20],
  cntrl: [0, 0x1f, 0x7f, 0x7f],
  digit: DIGIT,
  graph: [0x21, 0x7e],
  lower: [0x61, 0x7a],
  print: [0x20, 0x7e],
  punct: [0x21, 0x2f, 0x3a, 0x40, 0x5b, 0x60, 0x7b, 0x7e],
  space: [0x09, 0x0d, 0x20, 0x20],
  upper: [0x41, 0x5a],
  word: WORD,
  xdigit: [0x30, 0x39, 0x41, 0x46, 0x61, 0x66],
}
/** Characters `\b` counts as word characters (ASCII, as RE2). */
export const WORD_RANGES: Ranges = WORD

interface Flags { i: boolean, m: boolean, s: boolean }

/** Parses `src`; throws ReSyntaxError naming what is wrong and where. */
export function parseRegexp (src: string): ReNode {
  let pos = 0
  let flags: Flags = { i: false, m: false, s: false }
  let flagsOnly = false // the last atom was a flag group such as (?i), which nothing may repeat
  const fail = (msg: string, at = pos): never => { throw new ReSyntaxError(msg, at) }
  const set = (r: Ranges): ReNode => ({ t: 'set', r: flags.i ? fold(normalize(r)) : normalize(r) })
  const peek = (): number => pos < src.length ? src.codePointAt(pos)! : -1
  const take = (): number => {
    const c = src.codePointAt(pos)!
    pos += c > 0xffff ? 2 : 1
    return c
  }

  const hexAt = (from: number, to: number): number => {
    const h = src.slice(from, to)
    if (!/^[0-9A-Fa-f]+$/.test(h)) fail('invalid escape sequence: expected hex digits after \\x', from - 2)
    return parseInt(h, 16)
  }

  /** After a backslash (pos on the escaped character): a single character, or a class for \d \s \w and their negations. */
  const escape = (inClass: boolean): number | Ranges => {
    const at = pos - 1
    if (pos >= src.length) fail('trailing backslash at end of expression', at)
    const c = take()
    const ch = String.fromCodePoint(c)
    switch (ch) {
      case 't': return 0x09
      case 'n': return 0x0a
      case 'r': return 0x0d
      case 'f': return 0x0c
      case 'v': return 0x0b
      case 'a': return 0x07
      case 'x': {
        if (src[pos] === '{') {
          const end = src.indexOf('}', pos)
          if (end < 0) fail('invalid escape sequence: \\x{ without }', at)
          const v = hexAt(pos + 1, end)
          if (v > MAX_CP) fail('invalid escape sequence: code point above U+10FFFF', at)
          pos = end + 1
          return v
        }
        const v = hexAt(pos, pos + 2)
        pos += 2
        return v
      }
      case 'd': case 's': case 'w': return PERL[ch]!
      case 'D': case 'S': case 'W': return negate(PERL[ch.toLowerCase()]!)
      case 'p': case 'P': return fail('Unicode classes (\\p, \\P) are not supported by lb: use explicit ranges such as [\\x{0370}-\\x{03FF}]', at)
      case 'C': return fail('\\C (any byte) is not supported', at)
    }
    if (c >= 0x30 && c <= 0x37) {
      // Go: a single digit 1-7 is a backreference (not RE2); \0 and \NN... are octal, up to three digits
      if (c !== 0x30 && !/[0-7]/.test(src[pos] ?? '')) fail(`backreferences (\\${ch}) are not RE2 syntax`, at)
      let v = c - 0x30
      for (let k = 0; k < 2 && /[0-7]/.test(src[pos] ?? ''); k++) v = v * 8 + take() - 0x30
      return v
    }
    if (c === 0x38 || c === 0x39) fail(`backreferences (\\${ch}) are not RE2 syntax`, at)
    if (c < 0x80 && !/[A-Za-z0-9]/.test(ch)) return c // escaped punctuation is itself
    if (!inClass && 'AzbBQE'.includes(ch)) return -1 // handled by the caller
    return fail(`invalid escape sequence: \\${ch}`, at)
  }

  const classAt = (): ReNode => {
    const open = pos - 1
    let neg = false
    if (src[pos] === '^') { neg = true; pos++ }
    const r: Ranges = []
    let first = true
    for (;;) {
      if (pos >= src.length) fail('missing closing ]', open)
      if (src[pos] === ']' && !first) { pos++; break }
      first = false
      if (src.startsWith('[:', pos)) {
        const end = src.indexOf(':]', pos + 2)
        const m = end < 0 ? null : /^(\^?)([a-z]+)$/.exec(src.slice(pos + 2, end))
        const cls = m === null ? undefined : POSIX[m[2]!]
        if (m !== null && cls !== undefined) {
          r.push(...(m[1] === '^' ? negate(cls) : cls))
          pos = end + 2
          continue
        }
        if (m !== null) fail(`invalid character class range: [:${m[1]}${m[2]}:]`, pos)
      }
      const itemAt = pos
      let lo: number | Ranges = take()
      if (lo === 0x5c) lo = escape(true)
      if (typeof lo !== 'number') { r.push(...lo); continue }
      if (src[pos] === '-' && src[pos + 1] !== ']' && pos + 1 < src.length) {
        pos++
        let hi: number | Ranges = take()
        if (hi === 0x5c) hi = escape(true)
        if (typeof hi !== 'number' || hi < lo) fail(`invalid character class range: ${src.slice(itemAt, pos)}`, itemAt)
        r.push(lo, hi as number)
      } else r.push(lo, lo)
    }
    const body = flags.i ? fold(normalize(r)) : normalize(r)
    return { t: 'set', r: neg ? negate(body) : body }
  }

  const group = (): ReNode => {
    const open = pos - 1
    if (src[pos] === '?') {
      const rest = src.slice(pos + 1)
      if (/^(=|!|<=|<!)/.test(rest)) fail('lookaround assertions ((?=, (?!, (?<=, (?<!) are not RE2 syntax', open)
      if (rest.startsWith('>')) fail('atomic groups ((?>) are not RE2 syntax', open)
      const named = /^(P?<)([A-Za-z_][A-Za-z0-9_]*)>/.exec(rest)
      if (named !== null) {
        pos += 1 + named[0].length
      } else {
        const fm = /^([imsU]*)(?:-([imsU]*))?([:)])/.exec(rest)
        if (fm === null || (fm[2] !== undefined && fm[2] === '')) fail('invalid or unsupported Perl syntax: `(?`', open)
        const next: Flags = { ...flags }
        for (const f of fm![1]!) if (f !== 'U') next[f as keyof Flags] = true
        for (const f of fm![2] ?? '') if (f !== 'U') next[f as keyof Flags] = false
        pos += 1 + fm![0].length
        if (fm![3] === ')') { // flags for the rest of the enclosing group
          flags = next
          flagsOnly = true
          return { t: 'cat', xs: [] }
        }
        const saved = flags
        flags = next
        const inner = alternation()
        flags = saved
        if (src[pos] !== ')') fail('missing closing )', open)
        pos++
        return inner
      }
    }
    const saved = flags
    const inner = alternation()
    flags = saved
    if (src[pos] !== ')') fail('missing closing )', open)
    pos++
    return inner
  }

  /** One atom, or null at the end of a concatenation. */
  const atom = (): ReNode | null => {
    const c = peek()
    if (c < 0 || c === 0x7c || c === 0x29) return null // end, "|", ")"
    const at = pos
    take()
    switch (c) {
      case 0x28: return group()
      case 0x5b: return classAt()
      case 0x2e: return { t: 'set', r: flags.s ? [0, MAX_CP] : [0, 0x09, 0x0b, MAX_CP] }
      case 0x5e: return { t: 'assert', k: flags.m ? 'bol' : 'bot' }
      case 0x24: return { t: 'assert', k: flags.m ? 'eol' : 'eot' }
      case 0x2a: case 0x2b: case 0x3f: return fail(`missing argument to repetition operator: \`${String.fromCharCode(c)}\``, at)
      case 0x5c: {
        const e = escape(false)
        if (typeof e !== 'number') return set(e)
        if (e >= 0) return set([e, e])
        const k = src[pos - 1]!
        if (k === 'A') return { t: 'assert', k: 'bot' }
        if (k === 'z') return { t: 'assert', k: 'eot' }
        if (k === 'b') return { t: 'assert', k: 'wb' }
        if (k === 'B') return { t: 'assert', k: 'nwb' }
        if (k === 'E') return { t: 'cat', xs: [] } // a stray \E is ignored, as RE2
        const end = src.indexOf('\\E', pos) // \Q...\E: literal text
        const text = end < 0 ? src.slice(pos) : src.slice(pos, end)
        pos = end < 0 ? src.length : end + 2
        return { t: 'cat', xs: [...text].map((ch) => set([ch.codePointAt(0)!, ch.codePointAt(0)!])) }
      }
    }
    if (c === 0x7b) { // "{" starting a repetition with nothing before it
      if (/^\{\d+(,\d*)?\}/.test(src.slice(at))) fail(`missing argument to repetition operator: \`${/^\{[^}]*\}/.exec(src.slice(at))![0]}\``, at)
    }
    return set([c, c])
  }

  /** A repetition operator at pos: [min, max, length] or null. */
  const repeatOp = (): [number, number, number] | null => {
    const c = src[pos]
    if (c === '*') return [0, -1, 1]
    if (c === '+') return [1, -1, 1]
    if (c === '?') return [0, 1, 1]
    if (c !== '{') return null
    const m = /^\{(\d+)(,(\d*))?\}/.exec(src.slice(pos))
    if (m === null) return null // a literal "{", as Go
    const min = Number(m[1])
    const max = m[2] === undefined ? min : m[3] === '' ? -1 : Number(m[3])
    if (min > MAX_REPEAT || max > MAX_REPEAT || (max >= 0 && max < min)) fail(`invalid repeat count: \`${m[0]}\``, pos)
    return [min, max, m[0].length]
  }

  const concat = (): ReNode => {
    const xs: ReNode[] = []
    for (;;) {
      flagsOnly = false
      let x = atom()
      if (x === null) break
      const opAt = pos
      const op = repeatOp()
      if (op !== null) {
        if (flagsOnly) fail('missing argument to repetition operator', opAt)
        pos += op[2]
        if (src[pos] === '?') pos++ // lazy: the same language
        if (repeatOp() !== null) fail(`invalid nested repetition operator: \`${src.slice(opAt, pos + 1)}\``, opAt)
        x = { t: 'rep', x, min: op[0], max: op[1] }
      }
      xs.push(x)
    }
    return xs.length === 1 ? xs[0]! : { t: 'cat', xs }
  }

  const alternation = (): ReNode => {
    const xs = [concat()]
    while (src[pos] === '|') {
      pos++
      xs.push(concat())
    }
    return xs.length === 1 ? xs[0]! : { t: 'alt', xs }
  }

  const tree = alternation()
  if (pos < src.length) fail('unexpected ): no group to close', pos)
  return tree
}
