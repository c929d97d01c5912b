// A rule's regexp (regexp-syntax.ts) compiled at config load into a
// deterministic automaton: Thompson's NFA, then the subset construction over
// the classes of characters the pattern tells apart. Matching
// (core/worker/request/rule-match.ts) is then one table step per character: linear in
// the input whatever the pattern, so no request can make routing backtrack,
// and no allocation. The price is paid here, once: a pattern whose automaton
// would exceed MAX_STATES states (counted repetitions such as `(a|b)*a(a|b){20}`
// grow exponentially) is refused at `lb check` with that reason.
//
// The search is Go's MatchString: a match anywhere (a new thread starts at each
// position), true as soon as any thread reaches the end of the pattern. The
// zero-width assertions (^ $ \A \z \b \B) look at the previous and the next
// character: a DFA state is the set of NFA states waiting for a character plus
// the kind of the previous character, and the closure through the assertions
// is taken once the next character's kind is known.
import { type ReNode, type Ranges, WORD_RANGES, parseRegexp } from './regexp-syntax.js'

export const MAX_STATES = 4000
const MAX_NFA = 20_000
const MAX_CELLS = 1 << 20

/** The compiled automaton: plain data (typed arrays), sent to the workers with the config. */
export interface Dfa {
  /** the pattern as written */
  readonly source: string
  /** number of character classes (table columns) */
  readonly k: number
  /** class of each ASCII code point */
  readonly ascii: Uint16Array
  /** the first code point of each class, ascending (cuts[0] = 0): the class of a code point >= 128 is found by bisection */
  readonly cuts: Int32Array
  /** next state by [state * k + class]; -1 = a match was found, -2 = no match can follow (stop: false) */
  readonly table: Int32Array
  /** 1 when a state reached at the end of the input is a match */
  readonly acceptEnd: Uint8Array
}

// NFA state kinds
const SET = 0
const SPLIT = 1
const ASSERT = 2
const MATCH = 3
const EPS = 4

// kinds of the character before and after a position
const START = 0 // no character: the start (before) or the end (after) of the input
const WORD = 1
const NL = 2
const OTHER = 3

const ASSERTS = ['bot', 'eot', 'bol', 'eol', 'wb', 'nwb'] as const

class Nfa {
  readonly kind: number[] = []
  readonly out1: number[] = []
  readonly out2: number[] = []
  /** SET: index into sets; ASSERT: index into ASSERTS */
  readonly arg: number[] = []
  readonly sets: Ranges[] = []

  add (kind: number, out1: number, out2 = -1, arg = -1): number {
    if (this.kind.length >= MAX_NFA) throw new Error(`the regexp is too large (more than ${MAX_NFA} automaton states before determinisation): use smaller repetition counts`)
    this.kind.push(kind)
    this.out1.push(out1)
    this.out2.push(out2)
    this.arg.push(arg)
    return this.kind.length - 1
  }

  /** The start state of `n` followed by `next`. */
  compile (n: ReNode, next: number): number {
    switch (n.t) {
      case 'set':
        this.sets.push(n.r)
        return this.add(SET, next, -1, this.sets.length - 1)
      case 'assert': return this.add(ASSERT, next, -1, ASSERTS.indexOf(n.k))
      case 'cat': {
        let s = next
        for (let i = n.xs.length - 1; i >= 0; i--) s = this.compile(n.xs[i]!, s)
        return n.xs.length === 0 ? this.add(EPS, next) : s
      }
      case 'alt': {
        let s = this.compile(n.xs[n.xs.length - 1]!, next)
        for (let i = n.xs.length - 2; i >= 0; i--) s = this.add(SPLIT, this.compile(n.xs[i]!, next), s)
        return s
      }
      case 'rep': {
        let s: number
        if (n.max < 0) {
          const loop = this.add(SPLIT, -1, next)
          this.out1[loop] = this.compile(n.x, loop)
          s = loop
        } else {
          s = next
          for (let i = 0; i < n.max - n.min; i++) s = this.add(SPLIT, this.compile(n.x, s), next)
        }
        for (let i = 0; i < n.min; i++) s = this.compile(n.x, s)
        return s
      }
    }
  }
}

function inRanges (r: Ranges, c: number): boolean {
  for (let i = 0; i < r.length; i += 2) if (c >= r[i]! && c <= r[i + 1]!) return true
  return false
}

/** Compiles a pattern (Go RE2 syntax); throws a ReSyntaxError or an Error saying why it is refused. */
export function compileRegexp (source: string): Dfa {
  const nfa = new Nfa()
  const start = nfa.compile(parseRegexp(source), nfa.add(MATCH, -1))

  // the classes: cut wherever a set starts or ends, and around word characters and "\n" (the assertions' kinds)
  const cutSet = new Set<number>([0, 0x0a, 0x0b])
  for (const r of [...nfa.sets, WORD_RANGES]) for (let i = 0; i < r.length; i += 2) cutSet.add(r[i]!).add(r[i + 1]! + 1)
  const cuts = [...cutSet].filter((c) => c <= 0x10ffff).sort((a, b) => a - b)
  const k = cuts.length
  const kindOf = cuts.map((c) => c === 0x0a ? NL : inRanges(WORD_RANGES, c) ? WORD : OTHER)
  // for each set, the classes it takes (a class lies wholly inside or outside each set)
  const takes = nfa.sets.map((r) => cuts.map((c) => inRanges(r, c)))

  const assertHolds = (a: number, prev: number, next: number): boolean => {
    switch (ASSERTS[a]) {
      case 'bot': return prev === START
      case 'eot': return next === START
      case 'bol': return prev === START || prev === NL
      case 'eol': return next === START || next === NL
      case 'wb': return (prev === WORD) !== (next === WORD)
      default: return (prev === WORD) === (next === WORD)
    }
  }
  /** The SET states reachable from `set` through empty moves, or null when MATCH is. */
  const closure = (set: readonly number[], prev: number, next: number): number[] | null => {
    const seen = new Set<number>()
    const out: number[] = []
    const stack = [...set]
    while (stack.length > 0) {
      const s = stack.pop()!
      if (seen.has(s)) continue
      seen.add(s)
      switch (nfa.kind[s]) {
        case MATCH: return null
        case SET: out.push(s); break
        case SPLIT: stack.push(nfa.out2[s]!, nfa.out1[s]!); break
        case EPS: stack.push(nfa.out1[s]!); break
        case ASSERT: if (assertHolds(nfa.arg[s]!, prev, next)) stack.push(nfa.out1[s]!); break
      }
    }
    return out
  }

  const index = new Map<string, number>()
  const states: Array<{ set: number[], prev: number }> = []
  const stateOf = (set: number[], prev: number): number => {
    const key = `${prev}:${set.join(',')}`
    let i = index.get(key)
    if (i === undefined) {
      if (states.length >= MAX_STATES || (states.length + 1) * k > MAX_CELLS) {
        throw new Error(`the regexp needs more than ${states.length} automaton states (nested or counted repetitions such as \`(a|b)*a(a|b){20}\` grow exponentially): simplify it`)
      }
      i = states.length
      states.push({ set, prev })
      index.set(key, i)
    }
    return i
  }
  stateOf([start], START)
  const rows: number[][] = []
  const acceptEnd: number[] = []
  for (let d = 0; d < states.length; d++) {
    const { set, prev } = states[d]!
    const byKind = [START, WORD, NL, OTHER].map((next) => closure(set, prev, next))
    acceptEnd.push(byKind[START] === null ? 1 : 0)
    const row: number[] = []
    for (let c = 0; c < k; c++) {
      const live = byKind[kindOf[c]!]
      if (live === undefined || live === null) { row.push(-1); continue }
      const next = new Set<number>([start]) // unanchored: a new thread at every position
      for (const s of live) if (takes[nfa.arg[s]!]![c]) next.add(nfa.out1[s]!)
      row.push(stateOf([...next].sort((a, b) => a - b), kindOf[c]!))
    }
    rows.push(row)
  }
  // states from which no match can be reached (an anchored pattern past its anchor): the search stops there
  const live = acceptEnd.map((a) => a === 1)
  for (let changed = true; changed;) {
    changed = false
    rows.forEach((row, d) => {
      if (!live[d] && row.some((t) => t === -1 || (t >= 0 && live[t]))) live[d] = changed = true
    })
  }
  for (const row of rows) for (let c = 0; c < k; c++) if (row[c]! >= 0 && !live[row[c]!]) row[c] = -2
  const ascii = new Uint16Array(128)
  for (let c = 0, j = 0; c < 128; c++) {
    while (j + 1 < k && cuts[j + 1]! <= c) j++
    ascii[c] = j
  }
  return { source, k, ascii, cuts: Int32Array.from(cuts), table: Int32Array.from(rows.flat()), acceptEnd: Uint8Array.from(acceptEnd) }
}
