// The small scanners of the upstream response parser (response-parser.ts):
// lines, the status code, decimals and text of a response head read as a
// latin1 string (one char per byte, so offsets are byte offsets), and the
// excerpts its errors show in the log.

/** End of the line starting at `pos` (the index of its CR, or `end` for the last line); -1 if it holds a bare CR or LF. */
export function lineEnd (s: string, pos: number, end: number): number {
  let eol = s.indexOf('\r', pos)
  if (eol < 0 || eol > end) eol = end
  else if (eol < end && s.charCodeAt(eol + 1) !== 10) return -1
  const lf = s.indexOf('\n', pos)
  return lf >= 0 && lf < eol ? -1 : eol
}

/** The status code of a status line s[0, eol) "HTTP/1.x NNN[ reason]", or -1. */
export function statusCode (s: string, eol: number): number {
  if (eol < 12 || !s.startsWith('HTTP/1.') || s.charCodeAt(8) !== 32 || (eol > 12 && s.charCodeAt(12) !== 32)) return -1
  const minor = s.charCodeAt(7)
  if (minor !== 48 && minor !== 49) return -1
  const a = s.charCodeAt(9) - 48
  const b = s.charCodeAt(10) - 48
  const c = s.charCodeAt(11) - 48
  if (a < 0 || a > 9 || b < 0 || b > 9 || c < 0 || c > 9) return -1
  return a * 100 + b * 10 + c
}

export function isBlank (c: number): boolean { return c === 32 || c === 9 }

const HTTP1 = 'HTTP/1.'

/** buf[from, to) can be the start of an HTTP/1.x status line (it is, or will be once more bytes come). */
export function isHttpPrefix (buf: Buffer, from: number, to: number): boolean {
  const n = Math.min(to - from, HTTP1.length)
  for (let i = 0; i < n; i++) if (buf[from + i] !== HTTP1.charCodeAt(i)) return false
  return true
}

/** Up to 40 characters of latin1 `s` for a log line, JSON-quoted (control bytes escaped). */
export function excerpt (s: string): string {
  return JSON.stringify(s.length > 40 ? s.slice(0, 40) + '...' : s)
}

/**
 * The latin1 string holds a byte above 0x7f: its UTF-8 length then exceeds its
 * length. Buffer.byteLength is one native call: about 35 ns for a 140-byte head,
 * against about 135 ns for a regular expression scan of it.
 */
export function isWide (s: string): boolean {
  return Buffer.byteLength(s, 'utf8') !== s.length
}

/**
 * s[from, to) of a latin1 head as text: its bytes UTF-8-decoded when `wide`
 * and non-ASCII. Bytes that are not UTF-8 (obsolete latin1 text) become U+FFFD.
 */
export function text (s: string, from: number, to: number, wide: boolean): string {
  const v = s.slice(from, to)
  return wide && isWide(v) ? Buffer.from(v, 'latin1').toString('utf8') : v
}

/** A non-negative decimal s[from, to) of at most 15 digits, or -1. */
export function decimal (s: string, from: number, to: number): number {
  if (to <= from || to - from > 15) return -1
  let n = 0
  for (let i = from; i < to; i++) {
    const d = s.charCodeAt(i) - 48
    if (d < 0 || d > 9) return -1
    n = n * 10 + d
  }
  return n
}
