// What a correct proxy never forwards, read from the bytes a backend received
// for one request: at most one Content-Length and never beside
// Transfer-Encoding, one Host, no header the client named in Connection, no
// transfer coding but chunked; and the path in normal form (RFC 3986 §6.2.2:
// no dot segments, no escaped unreserved characters, upper-case escapes) with
// no ambiguous escape.

/** The first problem with the forwarded request head `raw` (latin1), or null. */
export function headProblem (raw: string, hopNames: string[]): string | null {
  const end = raw.indexOf('\r\n\r\n')
  const lines = (end < 0 ? raw : raw.slice(0, end)).split('\r\n')
  const names = lines.slice(1).map((l) => l.slice(0, l.indexOf(':')).trim().toLowerCase())
  const n = (h: string): number => names.filter((x) => x === h).length
  if (n('content-length') > 1) return 'two Content-Length headers forwarded'
  if (n('content-length') > 0 && n('transfer-encoding') > 0) return 'Content-Length and Transfer-Encoding forwarded together'
  if (n('host') !== 1) return `${n('host')} Host headers forwarded`
  for (const h of hopNames) if (names.includes(h.toLowerCase())) return `${h}, named in the client's Connection header, was forwarded`
  const te = lines.slice(1).find((l) => /^transfer-encoding:/i.test(l))
  if (te !== undefined && te.slice(te.indexOf(':') + 1).trim().toLowerCase() !== 'chunked') return `forwarded "${te}"`
  return null
}

const UNRESERVED_ESCAPE = /%(?:[46][1-9A-Fa-f]|[57][0-9Aa]|3[0-9]|2[DEde]|5[Ff]|7[Ee])/
const AMBIGUOUS = /%(?:2[Ff]|5[Cc]|00|25|3[Bb]|3[Ff]|23)/

/** The first problem with the path of the forwarded request line, or null. */
export function pathProblem (raw: string): string | null {
  const line = raw.slice(0, raw.indexOf('\r\n'))
  const target = line.split(' ')[1] ?? ''
  const path = target.split('?')[0]!
  if (!path.startsWith('/')) return null // not origin-form: nothing to compare
  if (/(^|\/)\.\.?(\/|$)/.test(path)) return `dot segment in the forwarded path ${JSON.stringify(path)}`
  if (UNRESERVED_ESCAPE.test(path)) return `escaped unreserved character left in the forwarded path ${JSON.stringify(path)}`
  if (/%(?:[a-f][0-9A-Fa-f]|[0-9A-F][a-f])/.test(path)) return `lower-case escape in the forwarded path ${JSON.stringify(path)}`
  if (AMBIGUOUS.test(path)) return `ambiguous escape forwarded in the path ${JSON.stringify(path)}`
  // eslint-disable-next-line no-control-regex -- control bytes are what this looks for
  if (/[\\\x00-\x20\x7f-\xff]/.test(path)) return `raw control, space, backslash or non-ASCII byte forwarded in the path ${JSON.stringify(path)}`
  return null
}
