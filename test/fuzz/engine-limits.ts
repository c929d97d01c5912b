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
]
