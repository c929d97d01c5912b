// The text of a response head as lb hands it to uWS, and the bytes uWS adds
// around heads and bodies: what core/worker/transport/uws/client.ts counts as sent beyond the
// body (core/worker/transport/sent-bytes.ts). No uWS here: only its wire format.
import { STATUS_CODES } from 'node:http'

const STATUS_LINE: string[] = []
for (const [code, text] of Object.entries(STATUS_CODES)) STATUS_LINE[Number(code)] = `${code} ${text}`

/** "200 OK": the status and its standard reason, or `reason` when it is another. */
export function statusLine (status: number, reason: string): string {
  const std = STATUS_LINE[status]
  if (std !== undefined && (reason === '' || (std.length === reason.length + 4 && std.endsWith(reason)))) return std
  return `${status} ${reason === '' ? 'Unknown' : reason}`
}

/**
 * Status and headers as one string for uWS's writeStatus. `close`: the
 * connection closes after this response (the client sent Connection: close, or
 * lb closes it). uWS closes but, unlike nginx and HAProxy, does not say so
 * (RFC 9112 §9.6: the server SHOULD); clients such as wrk would otherwise send
 * their next request into a closing connection. `length` >= 0: a
 * Content-Length line (a response without body whose length is known).
 *
 * The whole head goes to uWS in one writeStatus call: uWS writes
 * "HTTP/1.1 " + status + CRLF, so the header lines ride along after the status
 * text. Each call into uWS costs a JS→C++ crossing and two string conversions;
 * one per header was a measurable share of a proxied request. Invariant: no
 * name or value contains CR or LF (the upstream parser rejects such heads,
 * config values are validated, and uWS drops requests whose line or headers hold
 * a bare CR or LF, so none reaches a redirect's Location: test/plugins/redirect-scheme.test.ts);
 * a line break would be header injection with writeHeader too.
 */
export function headText (status: number, reason: string, headers: readonly string[], close: boolean, length: number): string {
  let head = statusLine(status, reason)
  for (let i = 0; i < headers.length; i += 2) head += '\r\n' + headers[i]! + ': ' + headers[i + 1]!
  if (length >= 0) head += '\r\ncontent-length: ' + length
  if (close) head += '\r\nconnection: close'
  return head
}

// What uWS 20.57 writes of a response beyond lb's head string and the body,
// in bytes, as captured on a raw socket (test/admin/bytes-out.test.ts checks
// the sum): headText's head is the text of a status line and header lines.
// Its size is its .length: header text is ASCII but for rare values (an
// upstream's non-ASCII value is sent as UTF-8, one byte more per such
// character, not counted; measuring UTF-8 costs ~100 ns a head).
/** "HTTP/1.1 " + head + CRLF, "Date: <IMF-fixdate, 29 chars>\r\n", "uWebSockets: 20\r\n" */
export const UWS_HEAD = 9 + 2 + 37 + 17
/** "Connection: close\r\n": end(…, true) and endWithoutBody(n, true) write it unless the request asked for the close */
export const UWS_CLOSE = 19
/** "\r\n" ending the head of endWithoutBody() */
export const UWS_NO_LENGTH = 2
/** "Transfer-Encoding: chunked\r\n\r\n", before the first write() */
export const UWS_CHUNKED = 30
/** "0\r\n\r\n": end() after write() */
export const UWS_LAST_CHUNK = 5

/** "Content-Length: n\r\n\r\n": end(body), tryEnd, endWithoutBody(n) and an end() with nothing written */
export function uwsLength (n: number): number {
  let digits = 1
  while (n >= 10) { n = Math.floor(n / 10); digits++ }
  return 20 + digits
}

/** "<hex size>\r\n" + CRLF around a chunk of n > 0 bytes written with write() (nothing for n = 0) */
export function uwsChunk (n: number): number {
  if (n === 0) return 0
  let digits = 1
  while (n >= 16) { n = Math.floor(n / 16); digits++ }
  return digits + 4
}
