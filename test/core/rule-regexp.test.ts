// The rule regexps' DFA (core/config/rules/regexp-dfa.ts) against V8's RegExp on the
// syntax both read alike: thousands of seeded random inputs per pattern must get
// the same yes/no. Then what only RE2 means (Go's `$`, \z, \Q...\E, (?U), octal,
// POSIX classes, the Kelvin sign under (?i)), and the decoded readers.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { compileRegexp } from '../../core/config/rules/regexp-dfa.js'
import { compareDecoded, queryHas, searchDecoded, searchRaw } from '../../core/worker/request/rule-match.js'

/** mulberry32: the same inputs on every run */
function rng (seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const PATTERNS = [
  'abc', '^abc', 'abc$', '^abc$', 'a|b|cd', '^(a|ab)(c|bcd)(d*)$', 'a*', 'a+b+', '^a?b?$', 'a{2}', '^a{2,3}$', 'a{2,}b',
  '[a-c]+x', '[^a-c/]+', '^/[a-z]+/[0-9]+$', '\\d+', '^\\w+$', '\\s', '\\bab\\b', '\\Bb', 'a.c', '^.*$', '(?i)AbC',
  '(?i)^[a-c]+$', '(?s)a.b', '(?m)^b$', '(?m)a$', '^(a+)+$', '(x+x+)+y', '^(\\w+\\s?)*$', '(?:ab)+c', '(a|b)*abb',
  '[[:digit:]]{2}', '[[:^alpha:]]', 'a\\.b', '^\\x41\\x{42}', '[\\d\\-]+', '\\W+', '[.]', '(?i:a)b', '^$', '',
]
const ALPHABET = ['a', 'b', 'c', 'd', 'x', 'y', 'A', 'B', 'C', '0', '1', '/', ' ', '\n', '-', '.', '_', 'é']

test('the DFA says what V8 says, pattern by pattern, on seeded random inputs', () => {
  const next = rng(20261127)
  for (const p of PATTERNS) {
    const d = compileRegexp(p)
    // JS: `$` and (?m) differ from Go's only where a "\n" ends the text, and (?i)/(?s)/(?m) are flags
    const flags = /^\(\?([ims]+)\)/.exec(p)
    const body = flags === null ? p : p.slice(flags[0].length)
    const jsBody = body.replace('(?i:a)', '[aA]').replace('[[:digit:]]', '[0-9]').replace('[[:^alpha:]]', '[^A-Za-z]').replace('\\x{42}', '\\u{42}')
    const js = new RegExp(jsBody, (flags?.[1] ?? '') + 'u')
    for (let n = 0; n < 3000; n++) {
      const len = Math.floor(next() * 12)
      let s = ''
      for (let i = 0; i < len; i++) s += ALPHABET[Math.floor(next() * ALPHABET.length)]!
      if (/\$|\(\?m\)/.test(p) && s.endsWith('\n')) s += 'z' // Go's $ is \z; JS's multiline $ agrees elsewhere
      assert.equal(searchRaw(d, s, 0, s.length), js.test(s), `${p} on ${JSON.stringify(s)}`)
    }
  }
})

test('RE2 meanings: $ is the end of the text, \\z, \\Q..\\E, lazy and ungreedy forms, octal, Kelvin sign', () => {
  const m = (p: string, s: string): boolean => searchRaw(compileRegexp(p), s, 0, s.length)
  assert.equal(m('a$', 'a\n'), false)
  assert.equal(m('(?m)a$', 'a\n'), true)
  assert.equal(m('a\\z', 'a'), true)
  assert.equal(m('^\\Q*.?\\E$', '*.?'), true)
  assert.equal(m('^a*?b+?$', 'aabb'), true)
  assert.equal(m('(?U)^a*$', 'aaa'), true)
  assert.equal(m('^\\101$', 'A'), true)
  assert.equal(m('(?i)k', '\u212a'), true)
  assert.equal(m('^.$', '😀'), true, 'one character, not two code units')
  assert.equal(m('^[^a]$', '😀'), true)
})

test('the syntax RE2 refuses, or lb cannot run in linear time, is refused with the reason', () => {
  const refused: Array<[string, RegExp]> = [
    ['(a)\\1', /backreferences \(\\1\) are not RE2 syntax/],
    ['a(?=b)', /lookaround/],
    ['a(?<!b)', /lookaround/],
    ['(?>a)', /atomic groups/],
    ['a**', /invalid nested repetition operator: `\*\*`/],
    ['*a', /missing argument to repetition operator/],
    ['a{1001}', /invalid repeat count/],
    ['a{3,2}', /invalid repeat count/],
    ['[b-a]', /invalid character class range: b-a/],
    ['[abc', /missing closing \]/],
    ['(abc', /missing closing \)/],
    ['abc)', /unexpected \)/],
    ['\\pL', /Unicode classes/],
    ['\\e', /invalid escape sequence: \\e/],
    ['a\\', /trailing backslash/],
    ['(?P<1a>x)', /invalid or unsupported Perl syntax/],
    ['(a|b)*a(a|b){16}', /needs more than 4000 automaton states/],
  ]
  for (const [p, why] of refused) assert.throws(() => compileRegexp(p), why, p)
  // Go reads a "{" that starts no repetition as itself
  assert.equal(searchRaw(compileRegexp('^a{x}$'), 'a{x}', 0, 4), true)
})

test('paths and query values are read decoded, in place', () => {
  const d = compileRegexp('^/a b/é$')
  assert.equal(searchDecoded(d, '/a%20b/%C3%A9', 0, 13, false), true)
  // a reserved character's escape stays three characters in a path, as Traefik's routing path
  assert.equal(searchDecoded(compileRegexp('^/a/b$'), '/a%2Fb', 0, 6, false), false)
  assert.equal(compareDecoded('/a%2Fb', 0, 6, '/a%2Fb', false), 1)
  assert.equal(compareDecoded('/a%20b/c', 0, 8, '/a b', false), 2)
  // a query: "+" is a space; a pair with a bad escape or a ";" is skipped, as Go's url.ParseQuery
  assert.equal(queryHas('q=a+b&x=1', 'q', 'a b', null), true)
  assert.equal(queryHas('q=%zz', 'q', '%zz', null), false)
  assert.equal(queryHas('q=1;x=2', 'q', '1;x=2', null), false)
  assert.equal(queryHas('%71=1', 'q', '1', null), true)
  assert.equal(queryHas('q=%E2%82', 'q', '', compileRegexp('^\\x{FFFD}{2}$')), true, 'a cut UTF-8 sequence: U+FFFD for each byte, as Go reads invalid UTF-8')
  assert.equal(queryHas('q', 'q', '', null), true)
  assert.equal(queryHas('q=', 'q', '', null), true)
  assert.equal(queryHas('qq=1', 'q', '1', null), false)
})
