// What an HTTP engine does with a request or a frame before lb sees it, where
// lb cannot change it: expected, documented behaviour, not pending work. The
// engine is this uWS build (uWebSockets.js 20.57) for the surfaces "http" and
// "ws", and Node's llhttp (node:http, which hands lb no raw bytes) for
// "http-node" (engine = "node"). A failed case is accepted here only when its
// key ("generator family/failed check") is listed, its bytes are of the kind
// the entry names (`when`), and its outcome is exactly what the entry says the
// engine does (`outcome`). Every entry quotes the line of the README that
// documents it (`readme`); lib/campaign.ts checks that README.md still says so.
export interface EngineLimit {
  surface: string
  /** the failure keys this behaviour explains */
  keys: readonly string[]
  /** what the engine does */
  does: string
  /** text of README.md that documents it (for HTTP: its table "Request forms at the edge" for uWS, "HTTP engines" for llhttp) */
  readme: string
  /** the sent bytes are of this kind */
  when: (bytes: Buffer) => boolean
  /** and what happened (the finding's "got") is this */
  outcome: (got: string) => boolean
}

/** The engine of each surface's entry point, as the campaign's report names it. */
export const ENGINE_OF: Readonly<Record<string, string>> = { http: 'uWS', ws: 'uWS', 'http-node': 'llhttp' }

/** the request head (up to the first empty line) as latin1 */
const head = (b: Buffer): string => { const s = b.toString('latin1'); const end = s.indexOf('\r\n\r\n'); return end < 0 ? s : s.slice(0, end + 2) }
/** a CR not followed by LF in the head */
const bareCr = (b: Buffer): boolean => /\r(?!\n)/.test(head(b))
/** the first line has no "SP HTTP/" version (read by uWS as an HTTP/0.9 line, with more bytes behind it) */
const noVersion = (b: Buffer): boolean => !/^[^\r\n]* HTTP\/[^\r\n]*\r\n/.test(b.toString('latin1'))
const silent = (got: string): boolean => got.startsWith('lb: nothing within')

/** the head lines (after the first) of a head as head() gives it */
const fieldLines = (h: string): string[] => h.split('\r\n').slice(1, -1)
/** a Host field whose value has a SP or HTAB at either end, beyond the one SP after the colon */
const hostOws = (b: Buffer): boolean => fieldLines(head(b)).some((l) => /^host:(?: [ \t]|\t|.*[ \t]$)/i.test(l))
/** a Transfer-Encoding field "chunked" with a SP or HTAB before it, beyond the one SP after the colon */
const teOwsChunked = (b: Buffer): boolean => fieldLines(head(b)).some((l) => /^transfer-encoding:(?: [ \t]|\t)[ \t]*chunked$/i.test(l))
/**
 * nginx's largest chunk size, 2^59-1: ngx_http_parse_chunked refuses a size over NGX_MAX_OFF_T_VALUE / 16 at each
 * byte of the size line, the CR after the digits too (nginx 1.22: 0x7ffffffffffffff is 413 past client_max_body_size,
 * 0x800000000000000 is 400). llhttp's is 2^64-1.
 */
const NGINX_MAX_CHUNK = 2n ** 59n - 1n
/** a chunked body whose first chunk-size line is hex digits alone, of a size llhttp reads and nginx cannot (2^59 to 2^64-1) */
const chunkPastNginx = (b: Buffer): boolean => {
  const s = b.toString('latin1')
  const end = s.indexOf('\r\n\r\n')
  const size = /^([0-9a-fA-F]{1,16})\r\n/.exec(s.slice(end + 4))?.[1]
  return end >= 0 && /\r\ntransfer-encoding: chunked\r\n/i.test(head(b)) && size !== undefined && BigInt(`0x${size}`) > NGINX_MAX_CHUNK
}
/** an HTTP/0.9 line (method SP target CRLF) and no end of the head after it */
const http09Unended = (b: Buffer): boolean => { const s = b.toString('latin1'); return /^[^ \r\n]+ [^ \r\n]+\r\n/.test(s) && !s.includes('\r\n\r\n') }

/** What the backend got, as the campaign prints it at the end of `got` (printable()), as latin1; null when absent or cut short. */
const forwardedOf = (got: string): string | null => {
  const at = got.indexOf('; the backend got ')
  if (at < 0) return null
  const p = got.slice(at + '; the backend got '.length)
  if (/\.\.\. \(\d+ bytes\)$/.test(p)) return null
  return p.replace(/\\(r|n|\\|x[0-9a-f]{2})/g, (_, e: string) => e === 'r' ? '\r' : e === 'n' ? '\n' : e === '\\' ? '\\' : String.fromCharCode(parseInt(e.slice(1), 16)))
}
/** The forwarded request split at the end of its head: its request line, its field lines, its body. */
const forwardedRequest = (got: string): { line: string, fields: string[], body: string } | null => {
  const f = forwardedOf(got)
  const end = f?.indexOf('\r\n\r\n') ?? -1
  if (f == null || end < 0) return null
  const [line, ...fields] = f.slice(0, end).split('\r\n')
  return { line: line!, fields, body: f.slice(end + 4) }
}
/** lb answered with these statuses (`200, 200`), 200 first, and did not close: `lb: status 200 after 12 ms ("HTTP/1.1 200 OK"); nginx: ...` */
const lbAnswered = (got: string, statuses: string): boolean => new RegExp(`^lb: status ${statuses} after \\d+ ms \\("HTTP/1\\.1 200 OK"\\); nginx: `).test(got)
/** the forwarded request is a POST framed by one `transfer-encoding: chunked` and no Content-Length */
const chunkedPost = (r: { line: string, fields: string[] }): boolean =>
  /^POST \S+ HTTP\/1\.1$/.test(r.line) && r.fields.filter((l) => /^transfer-encoding:/i.test(l)).join() === 'transfer-encoding: chunked' && !r.fields.some((l) => /^content-length:/i.test(l))
/** a chunked body of chunks of one or more bytes, well-formed, without its last chunk (not ended) */
const chunksUnended = (body: string): boolean => {
  for (let at = 0; at < body.length;) {
    const m = /^([0-9a-f]+)\r\n/.exec(body.slice(at))
    const n = m === null ? 0 : parseInt(m[1]!, 16)
    if (n === 0) return false
    at += m![0].length + n
    if (body.slice(at, at + 2) !== '\r\n') return false
    at += 2
  }
  return true
}

export const ENGINE_LIMITS: readonly EngineLimit[] = [
  {
    surface: 'http',
    keys: ['header-syntax/silent', 'control-bytes/silent', 'mutation/silent'],
    does: 'a CR not followed by LF in the request head: no answer; the connection is closed by the header time-out (timeouts.header)',
    readme: '| a CR not followed by LF in the request head |',
    when: bareCr,
    outcome: silent,
  },
  {
    surface: 'http',
    keys: ['request-line/silent'],
    does: 'an empty line before the request line (RFC 9112 §2.2 asks servers to skip it): no answer; closed by the header time-out (timeouts.header)',
    readme: '| an empty line before the request line |',
    when: (b) => b.toString('latin1').startsWith('\r\n'),
    outcome: silent,
  },
  {
    surface: 'http',
    keys: ['mutation/silent', 'version/silent', 'request-line/silent'],
    does: 'a request line without " HTTP/x.y" followed by more bytes (HTTP/0.9): no answer; closed by the header time-out (timeouts.header)',
    readme: '| HTTP/0.9 (`GET /path` and CRLF) |',
    when: noVersion,
    outcome: silent,
  },
  {
    surface: 'http',
    keys: ['chunk-size/forwarded', 'chunk-smuggle/forwarded'],
    does: 'reads a malformed chunk-size line leniently (spaces, an empty size, ";" without a name, leading zeros, a letter as a digit, no CRLF after the data); lb forwards the body uWS decoded, re-chunked well-formed, and closes the connection after its answer',
    readme: '| a malformed chunk-size line',
    when: (b) => /\r\ntransfer-encoding: chunked\r\n/i.test(head(b)),
    // and the connection closes after the answer (README, "Chunked request bodies")
    outcome: (got) => /^lb: status 200[ ,].*the backend got POST \S+ HTTP\/1\.1\\r\\n.*transfer-encoding: chunked\\r\\n/.test(got),
  },
  {
    surface: 'http',
    keys: ['header-syntax/forwarded'],
    does: 'drops a header line without a name (": v") and serves the request without it',
    readme: '| a header line without a name',
    when: (b) => head(b).includes('\r\n: '),
    outcome: (got) => got.startsWith('lb: status 200') && !/the backend got .*\\r\\n: /.test(got),
  },
  {
    surface: 'http',
    keys: ['mutation/forwarded', 'host/forwarded', 'control-bytes/forwarded'],
    does: 'removes non-ASCII bytes at either end of a header value before lb sees it (`Content-Length: 5\\xd6` reads as 5)',
    readme: '| non-ASCII bytes at either end of a header value |',
    when: (b) => /:[ \t]*[\x80-\xff]|[\x80-\xff][ \t]*\r\n/.test(head(b)),
    outcome: (got) => got.startsWith('lb: status 200'),
  },
  {
    surface: 'http',
    keys: ['te-te/unanswered', 'cl-te/unanswered', 'te-cl/unanswered', 'cl-cl/unanswered', 'mutation/unanswered', 'chunk-size/unanswered', 'chunk-smuggle/unanswered'],
    does: 'a second request in the same read behind one lb forwards (pipelining): the connection is closed without an answer, the second never forwarded',
    readme: '| pipelining (RFC 9112 §9.3.2)',
    // two request lines: the second behind the first one's head and body
    when: (b) => (b.toString('latin1').match(/ HTTP\/1\.[01]\r\n/g) ?? []).length >= 2,
    // nginx answered (one or both); lb neither, and closed
    outcome: (got) => /^lb: no status line, then closed .*; nginx: status \d+/.test(got),
  },
  {
    surface: 'http',
    keys: ['host/forwarded', 'header-syntax/forwarded', 'mutation/forwarded'],
    does: 'strips spaces and tabs around a header value (RFC 9110 §5.5: they are not part of it): `Host: a\\t` is routed and forwarded as `a`',
    readme: '| spaces or tabs around a header value',
    when: (b) => /:[^\r\n]*[ \t]\r\n/.test(head(b)),
    outcome: (got) => got.startsWith('lb: status 200'),
  },
  {
    surface: 'http',
    keys: ['garbage/silent'],
    does: 'waits for the end of the request line, whatever its first bytes: bytes without a line end get no answer until the header time-out (timeouts.header)',
    readme: '| bytes without a line end',
    when: (b) => !b.includes(0x0a),
    outcome: silent,
  },
  {
    surface: 'ws',
    keys: ['unmasked/open'],
    does: 'reads every client frame as masked: an unmasked frame is misread and the session stays open until the idle time-out',
    readme: 'reads every client frame as masked',
    when: () => true,
    outcome: (got) => got.startsWith('upgraded; still open'),
  },
  {
    surface: 'ws',
    keys: ['fragment-error/open'],
    does: 'joins a new data frame inside an unfinished fragmented message to that message; the session stays open',
    readme: 'joins a new data frame inside an unfinished fragmented message',
    when: () => true,
    outcome: (got) => got.startsWith('upgraded; still open'),
  },
  {
    surface: 'ws',
    keys: ['close-code/close-code'],
    does: 'answers a close frame with an invalid code or a 1-byte body with an empty close frame (no code) and closes',
    readme: 'answers a close frame with an invalid code',
    when: () => true,
    outcome: (got) => got.includes('lb sent \\x88\\x00'),
  },
  {
    surface: 'http-node',
    keys: ['host/forwarded'],
    does: 'strips spaces and tabs around a Host value (RFC 9110 §5.5: they are not part of it): `Host: a\\t` is routed and forwarded as `a`',
    readme: '| spaces or tabs around a Host value (`Host: a\\t`, `Host:\\ta`) |',
    when: hostOws,
    // one Host forwarded, without them (an absolute-form target's authority replaces it)
    outcome: (got) => {
      const r = forwardedRequest(got)
      const hosts = r?.fields.filter((l) => /^host:/i.test(l)) ?? []
      return lbAnswered(got, '200') && r !== null && /^GET \S+ HTTP\/1\.1$/.test(r.line) && hosts.length === 1 && /^host: [^ \t](?:.*[^ \t])?$/.test(hosts[0]!)
    },
  },
  {
    surface: 'http-node',
    keys: ['te-te/forwarded'],
    does: 'strips spaces and tabs before "chunked" in Transfer-Encoding (RFC 9110 §5.5) and frames the body as chunked: it is forwarded so, and what follows its last chunk is the next request, answered in order',
    readme: '| spaces or tabs before `chunked` in Transfer-Encoding (`Transfer-Encoding: \\tchunked`) |',
    when: teOwsChunked,
    // both answered (the POST and the request behind its empty body); the POST forwarded with that empty body alone
    outcome: (got) => {
      const r = forwardedRequest(got)
      return lbAnswered(got, '200, 200') && r !== null && chunkedPost(r) && r.body === '0\r\n\r\n'
    },
  },
  {
    surface: 'http-node',
    keys: ['chunk-size/forwarded'],
    does: 'reads chunk sizes up to 2^64-1 (nginx: 400 from 2^59): the head is forwarded and the body streamed re-chunked as it comes, not ended, never a second request',
    readme: '| a chunk size from 2^59 to 2^64-1 |',
    when: chunkPastNginx,
    // the backend's answer comes before the body ends (it never does); what came of it was forwarded as chunks
    outcome: (got) => {
      const r = forwardedRequest(got)
      return lbAnswered(got, '200') && r !== null && chunkedPost(r) && chunksUnended(r.body)
    },
  },
  {
    surface: 'http-node',
    keys: ['version/silent'],
    does: 'reads a request line without a version (`GET /path` and CRLF) as HTTP/0.9 and waits for the end of the head: 408 at timeouts.header, 505 once an empty line comes',
    readme: '| a request line without a version (`GET /path` and CRLF) and no end of the head |',
    when: http09Unended,
    outcome: silent,
  },
]
