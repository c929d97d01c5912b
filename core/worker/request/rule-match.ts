// What a router's matchers read of a request, on the hot path: a DFA run over a
// string (regexp-dfa.ts), a path or query value read in place with its percent
// escapes decoded as it goes, a query parameter found by scanning ctx.query.
// Nothing here allocates: no substring, no decoded copy, no array.
//
// The path routing sees is Traefik's routing path (pkg/muxer/http/mux.go
// withRoutingPath) of lb's normalised path (request-path.ts): escapes of
// reserved characters (%2F, %3F, %25, ...) stay as they are, every other escape
// is decoded (lb's normal form has already decoded the unreserved ones). A
// query parameter is read as Go's url.ParseQuery does: pairs split on "&",
// a pair with ";" or a bad escape ignored, "+" and escapes decoded.
import type { Dfa } from '../../config/rules/regexp-dfa.js'

/** Index of the code unit after the last character decode() read: the decoders' second result, kept here so that they return one number. */
let after = 0

const RESERVED: readonly boolean[] = (() => {
  const r = new Array<boolean>(256).fill(false)
  for (const c of ':/?#[]@!$&\'()*+,;=%') r[c.charCodeAt(0)] = true
  return r
})()

function hexAt (s: string, i: number): number {
  const hi = hexValue(s.charCodeAt(i))
  const lo = hexValue(s.charCodeAt(i + 1))
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo
}

function hexValue (c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30
  const l = c | 0x20
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1
}

/** The code point at s[i] (a surrogate pair joined); sets `after`. */
function rawAt (s: string, i: number, end: number): number {
  const c = s.charCodeAt(i)
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < end) {
    const lo = s.charCodeAt(i + 1)
    if (lo >= 0xdc00 && lo <= 0xdfff) {
      after = i + 2
      return ((c - 0xd800) << 10) + (lo - 0xdc00) + 0x10000
    }
  }
  after = i + 1
  return c
}

/**
 * The character at s[i] with percent escapes decoded (UTF-8 sequences of
 * escapes joined into one code point; a byte that starts no valid sequence is
 * U+FFFD, as Go's regexp reads invalid UTF-8). `query`: "+" is a space; else
 * (a path) escapes of reserved characters are left as the three characters.
 * Sets `after`.
 */
function decodeAt (s: string, i: number, end: number, query: boolean): number {
  const c = s.charCodeAt(i)
  if (c === 0x2b && query) { after = i + 1; return 0x20 }
  if (c !== 0x25 || i + 2 >= end) return rawAt(s, i, end)
  const b = hexAt(s, i + 1)
  if (b < 0 || (!query && RESERVED[b] === true)) return rawAt(s, i, end)
  after = i + 3
  if (b < 0x80) return b
  const n = b >= 0xf0 && b <= 0xf4 ? 3 : b >= 0xe0 ? 2 : b >= 0xc2 && b < 0xe0 ? 1 : -1
  if (n < 0) return 0xfffd
  let cp = b & (0x3f >> n)
  for (let k = 0, j = i + 3; k < n; k++, j += 3) {
    const cb = j + 2 < end && s.charCodeAt(j) === 0x25 ? hexAt(s, j + 1) : -1
    if (cb < 0x80 || cb > 0xbf) return 0xfffd // a sequence cut short: its lead byte alone stands for U+FFFD
    cp = (cp << 6) | (cb & 0x3f)
  }
  if ((n === 2 && cp < 0x800) || (n === 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) return 0xfffd
  after = i + 3 + 3 * n
  return cp
}

function classOf (d: Dfa, cp: number): number {
  if (cp < 128) return d.ascii[cp]!
  const cuts = d.cuts
  let lo = 0
  let hi = cuts.length - 1
  while (lo < hi) { // the last cut <= cp
    const mid = (lo + hi + 1) >> 1
    if (cuts[mid]! <= cp) lo = mid
    else hi = mid - 1
  }
  return lo
}

/** Go's MatchString over s[from, to): true when the pattern matches anywhere in it. */
export function searchRaw (d: Dfa, s: string, from: number, to: number): boolean {
  const table = d.table
  const k = d.k
  const ascii = d.ascii
  let st = 0
  for (let i = from; i < to;) {
    const c = s.charCodeAt(i)
    let cls: number
    if (c < 128) {
      cls = ascii[c]!
      i++
    } else {
      cls = classOf(d, rawAt(s, i, to))
      i = after
    }
    st = table[st * k + cls]!
    if (st < 0) return st === -1 // -1: matched; -2: no match can follow
  }
  return d.acceptEnd[st] === 1
}

/** As searchRaw, over the decoded text of s[from, to) (a query value, or a path with its escapes). */
export function searchDecoded (d: Dfa, s: string, from: number, to: number, query: boolean): boolean {
  const table = d.table
  const k = d.k
  let st = 0
  for (let i = from; i < to;) {
    const cp = decodeAt(s, i, to, query)
    i = after
    st = table[st * k + classOf(d, cp)]!
    if (st < 0) return st === -1
  }
  return d.acceptEnd[st] === 1
}

/**
 * Compares the decoded text of s[from, to) with `v` (code points as a string):
 * 1 when equal, 2 when `v` is a prefix of it (not equal), 0 otherwise.
 */
export function compareDecoded (s: string, from: number, to: number, v: string, query: boolean): number {
  let j = 0
  const n = v.length
  for (let i = from; i < to;) {
    if (j >= n) return 2
    const cp = decodeAt(s, i, to, query)
    i = after
    const want = v.codePointAt(j)!
    if (cp !== want) return 0
    j += want > 0xffff ? 2 : 1
  }
  return j === n ? 1 : 0
}

/** True when s[from, to) has no malformed escape (Go's url.QueryUnescape would refuse it) and no ";" (Go ignores such a pair). */
function goodPair (s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i)
    if (c === 0x3b) return false
    if (c === 0x25) {
      if (i + 2 >= to || hexAt(s, i + 1) < 0) return false
      i += 2
    }
  }
  return true
}

/**
 * Whether a query parameter named `key` has a value equal to `value` (re === null) or matched by `re`, over the
 * raw query `q` (ctx.query, without "?"): Go's url.Values lookup without building them.
 */
export function queryHas (q: string, key: string, value: string, re: Dfa | null): boolean {
  const n = q.length
  for (let i = 0; i < n;) {
    let amp = q.indexOf('&', i)
    if (amp < 0) amp = n
    if (amp > i && goodPair(q, i, amp)) {
      let eq = q.indexOf('=', i)
      if (eq < 0 || eq > amp) eq = amp
      if (compareDecoded(q, i, eq, key, true) === 1) {
        const vFrom = eq < amp ? eq + 1 : amp
        if (re === null ? compareDecoded(q, vFrom, amp, value, true) === 1 : searchDecoded(re, q, vFrom, amp, true)) return true
      }
    }
    i = amp + 1
  }
  return false
}
