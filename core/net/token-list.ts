// Comma-separated token lists in header values (RFC 9110 §5.6.1), such as
// Connection's, and ASCII case-insensitive comparison in place. Nothing is
// allocated for a list whose every token is among the skipped ones, the common case.

/**
 * The tokens of list `v`, lower-case, other than those in `skip` (lower-case,
 * compared ignoring case); null when there are none. Empty elements and
 * whitespace around tokens are ignored.
 */
export function otherTokens (v: string, skip: readonly string[]): string[] | null {
  // most lists are one skipped token as a whole, in lower case ("keep-alive", "close"): answered without a scan
  for (let j = 0; j < skip.length; j++) if (v === skip[j]) return null
  let out: string[] | null = null
  const n = v.length
  let i = 0
  while (i < n) {
    let c = v.charCodeAt(i)
    if (c === 44 || c === 32 || c === 9) { i++; continue }
    const start = i
    while (i < n && (c = v.charCodeAt(i)) !== 44 && c !== 32 && c !== 9) i++
    if (!skipped(v, start, i - start, skip)) (out ??= []).push(v.slice(start, i).toLowerCase())
  }
  return out
}

function skipped (v: string, start: number, len: number, skip: readonly string[]): boolean {
  for (let j = 0; j < skip.length; j++) if (skip[j]!.length === len && eqLower(v, start, skip[j]!)) return true
  return false
}

/** s[pos, pos + lower.length) equals `lower` ignoring ASCII case. */
export function eqLower (s: string, pos: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) {
    let c = s.charCodeAt(pos + i)
    if (c >= 65 && c <= 90) c += 32
    if (c !== lower.charCodeAt(i)) return false
  }
  return true
}
