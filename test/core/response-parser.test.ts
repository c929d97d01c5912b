// The upstream response parser on its own: what it forwards, what it drops,
// and which heads it refuses (the proxy answers 502 for those).
import { strict as assert } from 'node:assert'
import { describe, test } from 'node:test'
import { ResponseParser, type ResponseSink } from '../../core/upstream/response-parser.js'

interface Parsed { status: number, reason: string, headers: string[], contentLength: number, body: string, ended: boolean, error: string | null, keepAlive: boolean }

/** Feeds `wire` in pieces of `step` bytes (0 = all at once) and records what the parser reports. */
function parse (wire: string, step = 0, isHead = false): Parsed {
  const out: Parsed = { status: 0, reason: '', headers: [], contentLength: -2, body: '', ended: false, error: null, keepAlive: true }
  const sink: ResponseSink = {
    onHead (status, reason, headers, contentLength) { Object.assign(out, { status, reason, headers, contentLength }) },
    onBody (buf, start, end) { out.body += buf.toString('latin1', start, end); return true },
    onEnd () { out.ended = true },
  }
  const p = new ResponseParser()
  p.reset(sink, isHead)
  const bytes = Buffer.from(wire, 'latin1')
  const n = step === 0 ? bytes.length : step
  for (let i = 0; i < bytes.length && out.error === null; i += n) {
    // a fresh buffer per read with the bytes at an offset, as a shared read buffer would hold them
    const read = Buffer.alloc(n + 7)
    const piece = bytes.subarray(i, i + n)
    piece.copy(read, 7)
    out.error = p.feed(read, 7, 7 + piece.length)
  }
  out.keepAlive = p.keepAlive
  return out
}

const NGINX = 'HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 22 Nov 2026 08:00:00 GMT\r\nContent-Type: text/plain\r\n' +
  'Content-Length: 16\r\nConnection: keep-alive\r\nKEEP-ALIVE: timeout=5\r\nX-Spaced:  \t a b \t \r\nX-Empty:\r\n\r\n0123456789abcdef'

describe('upstream response parser', () => {
  test('keeps end-to-end headers as received (case, order, trimmed values); drops framing, Date and hop-by-hop ones', () => {
    for (const step of [0, 1, 2, 5, 64]) {
      const r = parse(NGINX, step)
      assert.equal(r.error, null, `step ${step}`)
      assert.equal(r.status, 200)
      assert.equal(r.reason, 'OK')
      assert.deepEqual(r.headers, ['Server', 'nginx/1.22.1', 'Content-Type', 'text/plain', 'X-Spaced', 'a b', 'X-Empty', ''])
      assert.equal(r.contentLength, 16)
      assert.equal(r.body, '0123456789abcdef')
      assert.ok(r.ended)
      assert.ok(r.keepAlive)
    }
  })

  test('a head longer than the parser\'s first look (1 KiB) in one read, and one split across reads', () => {
    const long = 'v'.repeat(3000)
    for (const step of [0, 700]) {
      const r = parse(`HTTP/1.1 200 OK\r\nX-Long: ${long}\r\nContent-Length: 2\r\n\r\nok`, step)
      assert.equal(r.error, null)
      assert.deepEqual([r.headers, r.body, r.ended], [['X-Long', long], 'ok', true])
    }
  })

  test('UTF-8 header values are decoded; ASCII ones and the body bytes after them, in the same read, are untouched', () => {
    const utf8 = (s: string): string => Buffer.from(s, 'utf8').toString('latin1') // the bytes on the wire
    const binary = '\x1f\x8b\x08\x00\xff\xfe'
    for (const [wire, headers] of [
      [`HTTP/1.1 200 ${utf8('Très bien')}\r\nX-Name: ${utf8('Zoë')}\r\nX-Plain: abc\r\nContent-Length: 6\r\n\r\n${binary}`, ['X-Name', 'Zoë', 'X-Plain', 'abc']],
      [`HTTP/1.1 200 OK\r\nX-Plain: abc\r\nContent-Length: 6\r\n\r\n${binary}`, ['X-Plain', 'abc']],
    ] as const) {
      for (const step of [0, 3]) {
        const r = parse(wire, step)
        assert.equal(r.error, null)
        assert.deepEqual(r.headers, headers)
        assert.equal(r.body, binary)
      }
    }
    assert.equal(parse(`HTTP/1.1 200 ${utf8('Très bien')}\r\nContent-Length: 0\r\n\r\n`).reason, 'Très bien')
  })

  test('chunked bodies, interim 1xx heads, HEAD and 204 without a body, HTTP/1.0 and Connection: close', () => {
    const chunked = parse('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n', 3)
    assert.equal(chunked.error, null)
    assert.deepEqual([chunked.status, chunked.contentLength, chunked.body, chunked.ended], [201, -1, 'abcde', true])
    const head = parse('HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n', 0, true)
    assert.deepEqual([head.contentLength, head.ended], [99, true])
    assert.deepEqual([parse('HTTP/1.1 204 No Content\r\n\r\n').ended], [true])
    assert.equal(parse('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n').keepAlive, false)
    assert.equal(parse('HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n').keepAlive, true)
    assert.equal(parse('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n').keepAlive, false)
    const untilClose = parse('HTTP/1.1 200\r\n\r\nrest')
    assert.deepEqual([untilClose.reason, untilClose.body, untilClose.keepAlive], ['', 'rest', false])
  })

  test('refuses malformed heads: bad status line, bare CR or LF, obs-fold, no colon, bad or conflicting Content-Length', () => {
    const bad: Array<[string, RegExp]> = [
      ['HTTP/2 200 OK\r\n\r\n', /status line/],
      ['HTTP/1.1 20x OK\r\n\r\n', /status line/],
      ['HTTP/1.1 200OK\r\n\r\n', /status line/],
      ['HTTP/1.1 200 OK\nServer: x\r\n\r\n', /status line/],
      ['HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n', /header line/],
      ['HTTP/1.1 200 OK\r\nX-A: a\nX-Injected: b\r\n\r\n', /header line/],
      ['HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\n\r\n', /header line/],
      ['HTTP/1.1 200 OK\r\nno colon\r\n\r\n', /header line/],
      ['HTTP/1.1 200 OK\r\n: empty name\r\n\r\n', /header line/],
      ['HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n', /content-length/i],
      ['HTTP/1.1 200 OK\r\nContent-Length: 1\r\ncontent-length: 2\r\n\r\n', /content-length/i],
      ['HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n', /transfer-encoding/i],
    ]
    for (const [wire, err] of bad) {
      for (const step of [0, 1]) assert.match(parse(wire, step).error ?? 'accepted', err, JSON.stringify(wire))
    }
  })

  test('says what was wrong for the log (detail), never a header value; a head that cannot be HTTP/1.x is refused at its first bytes', () => {
    const detail = (wire: string, step = 0): [string | null, string] => {
      const p = new ResponseParser()
      p.reset({ onHead () {}, onBody () { return true }, onEnd () {} }, false)
      const bytes = Buffer.from(wire, 'latin1')
      let err: string | null = null
      for (let i = 0; i < bytes.length && err === null; i += step === 0 ? bytes.length : step) err = p.feed(bytes, i, Math.min(bytes.length, i + (step === 0 ? bytes.length : step)))
      return [err, p.detail]
    }
    assert.deepEqual(detail('SSH-2.0-OpenSSH_9.2\r\n'), ['invalid status line', '"SSH-2.0-OpenSSH_9.2\\r\\n"'], 'no CRLF CRLF needed: refused at once')
    assert.deepEqual(detail('<html>'), ['invalid status line', '"<html>"'])
    assert.deepEqual(detail('HTTP/1.1 2x0 OK\r\n\r\n'), ['invalid status line', '"HTTP/1.1 2x0 OK"'])
    assert.deepEqual(detail('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\n'), ['conflicting Content-Length headers', '3 and 30'])
    assert.deepEqual(detail('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n'), ['invalid Content-Length', '"-1"'])
    assert.deepEqual(detail('HTTP/1.1 200 OK\r\nSet-Cookie: s=secret\r\n folded\r\n\r\n'), ['invalid header line', 'a folded line (obs-fold)'])
    assert.deepEqual(detail('HTTP/1.1 200 OK\r\nX-Token secret\r\n\r\n'), ['invalid header line', 'a line without a colon'])
    assert.deepEqual(detail(`HTTP/1.1 200 OK\r\nX-Big: ${'v'.repeat(70_000)}`, 8192), ['response head too large', 'over 65536 bytes'])
    assert.deepEqual(detail(`HTTP/1.1 200 OK\r\nX-Big: ${'v'.repeat(70_000)}\r\n\r\n`, 65536), ['response head too large', 'over 65536 bytes'], 'its end in the read after the 64 KiB-th byte')
    assert.deepEqual(detail('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n'), ['invalid chunk size', '" 5"'])
    assert.deepEqual(detail('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n'), ['invalid chunk: no CRLF after its data', '"XX0" where the chunk\'s CRLF ends'])
    for (const step of [1, 3]) assert.equal(detail('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', step)[0], null, 'a head split at any byte is not taken for garbage')
  })
})
