// Request smuggling through uWS's chunked-body parser (README, "Chunked request
// bodies"). uWS 20.57 reads a chunk-size line leniently: " 24" is size 0, so the
// body ends there and the chunk data is parsed as a new request on the same
// connection. lb cannot see the raw bytes, so it contains it: a connection that
// carried a chunked body serves nothing after its answer. These tests send every
// spelling of a chunk-size line we could think of, whose data is a whole request,
// in one write and with the head and size line first, to a route lb forwards and
// to one it answers itself (basicAuth's 401), and assert that the backend never
// sees the hidden request. The valid spellings are served, the body whole.
import { strict as assert } from 'node:assert'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type Lb, sleep, startLb } from '../helpers.js'
import { mwConfig } from '../plugins/setup.js'
import { OK, type RawBackend, exchange, startRawBackend } from './raw-http.js'

/** hex digits of n, as a chunk-size line spells them normally */
const hex = (n: number): string => n.toString(16)

/**
 * Chunk-size lines for a chunk of `n` bytes. The valid ones (RFC 9112 §7.1: hex digits, any case, optional
 * chunk extensions) first; then what nginx answers 400 to.
 */
export function sizeSpellings (n: number): Array<{ name: string, line: string, valid: boolean, uwsRefuses?: true }> {
  const h = hex(n)
  return [
    { name: 'plain', line: `${h}\r\n`, valid: true },
    { name: 'upper case', line: `${h.toUpperCase()}\r\n`, valid: true },
    { name: 'leading zeros', line: `000${h}\r\n`, valid: true },
    // uWS reads ';' as a hex digit and answers 400 (engine = "node" serves it)
    { name: 'extension', line: `${h};ext=1\r\n`, valid: true, uwsRefuses: true },
    { name: 'leading space', line: ` ${h}\r\n`, valid: false },
    { name: 'leading tab', line: `\t${h}\r\n`, valid: false },
    { name: 'two leading spaces', line: `  ${h}\r\n`, valid: false },
    { name: 'trailing space', line: `${h} \r\n`, valid: false },
    { name: 'trailing tab', line: `${h}\t\r\n`, valid: false },
    { name: 'space before extension', line: `${h} ;ext\r\n`, valid: false },
    { name: 'bare LF', line: `${h}\n`, valid: false },
    { name: 'bare CR', line: `${h}\r`, valid: false },
    { name: '0x prefix', line: `0x${h}\r\n`, valid: false },
    { name: 'plus sign', line: `+${h}\r\n`, valid: false },
    { name: 'minus sign', line: `-${h}\r\n`, valid: false },
    { name: 'empty size', line: '\r\n', valid: false },
    { name: 'semicolon only', line: `;${h}\r\n`, valid: false },
    { name: 'non-hex letter', line: `g${h}\r\n`, valid: false },
    { name: 'overlong', line: `${'0'.repeat(40)}${h}\r\n`, valid: false },
    { name: 'huge', line: 'ffffffffffffffffffff\r\n', valid: false },
    { name: 'size too small', line: `${hex(n - 4)}\r\n`, valid: false },
  ]
}

describe('chunked request bodies: nothing behind one is forwarded', () => {
  let backend: RawBackend, lb: Lb
  before(async () => {
    backend = await startRawBackend(() => OK)
    lb = await startLb('[global]\nworkers = 2\n' + mwConfig(backend.address, `
[middlewares.auth]
type = "basicAuth"
users = ["nobody:{SHA}2jmj7l5rSw0yVb/vlWAYkK/YBwk="]
`, { '/priv': ['auth'], '/': [] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  let n = 0

  /** Writes `parts` on one connection, `gapMs` apart; resolves with what was read once lb closes, or after `ms`. */
  function send (parts: string[], gapMs: number, ms = 2000): Promise<{ text: string, closed: boolean }> {
    return new Promise((resolve) => {
      const s = net.connect(lb.port, '127.0.0.1')
      let text = ''
      s.on('data', (d: Buffer) => { text += d.toString('latin1') })
      s.on('error', () => {})
      s.on('connect', async () => {
        for (const [i, p] of parts.entries()) {
          if (i > 0) await sleep(gapMs)
          if (!s.destroyed) s.write(Buffer.from(p, 'latin1'))
        }
      })
      const timer = setTimeout(() => { s.destroy(); resolve({ text, closed: false }) }, ms)
      s.on('close', () => { clearTimeout(timer); resolve({ text, closed: true }) })
    })
  }

  /** Every spelling, to `path`, in one write and in two; returns the ids of the hidden requests and the answers. */
  async function campaign (path: string): Promise<Array<{ id: string, name: string, valid: boolean, uwsRefuses?: true, split: boolean, text: string, closed: boolean }>> {
    const runs = []
    for (const split of [false, true]) {
      for (const sp of sizeSpellings('GET /SMUG-0000 HTTP/1.1\r\nhost: a\r\n\r\n'.length)) {
        const id = `SMUG-${String(++n).padStart(4, '0')}`
        const hidden = `GET /${id} HTTP/1.1\r\nhost: a\r\n\r\n`
        const head = `POST ${path}/${id} HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n${sp.line}`
        const rest = `${hidden}\r\n0\r\n\r\n`
        runs.push(send(split ? [head, rest] : [head + rest], 300).then((r) => ({ id, ...sp, split, ...r })))
      }
    }
    const out = await Promise.all(runs)
    await sleep(300) // a forwarded hidden request would reach the backend by now
    return out
  }

  /** request lines the backend got for a hidden request (uWS drops two bytes before it: "GET" may arrive as "T") */
  const hiddenSeen = (): string[] => backend.heads.map((h) => h.split('\r\n')[0]!).filter((l) => / \/SMUG-/.test(l) && !l.startsWith('POST '))

  test('to a forwarded route: the backend never sees the request inside a chunk, whatever the size line', async () => {
    const runs = await campaign('/outer')
    assert.deepEqual(hiddenSeen(), [], 'hidden requests forwarded')
    for (const r of runs) {
      assert.ok(r.closed, `${r.name}${r.split ? ' (split)' : ''}: the connection stays open after the answer: ${JSON.stringify(r.text)}`)
      const answers = r.text.match(/^HTTP\/1\.1 \d{3}/gm) ?? []
      assert.ok(answers.length <= 1, `${r.name}${r.split ? ' (split)' : ''}: more than one answer: ${JSON.stringify(r.text)}`)
      if (r.uwsRefuses === true) {
        assert.match(r.text, /^HTTP\/1\.1 400 /, `${r.name}: ${JSON.stringify(r.text)}`)
      } else if (r.valid) {
        // served, with the whole chunk as the body, and told the connection closes
        assert.match(r.text, /^HTTP\/1\.1 200 /, `${r.name}: ${JSON.stringify(r.text)}`)
        assert.match(r.text, /\r\nconnection: close\r\n/i, `${r.name}: ${JSON.stringify(r.text)}`)
        const head = backend.heads.find((h) => h.startsWith(`POST /outer/${r.id} `))
        assert.ok(head !== undefined, `${r.name}: the request was not forwarded`)
        // (in two writes the backend, which answers at the head, may have answered before the rest came)
        if (!r.split) assert.ok(backend.received().includes(`GET /${r.id} HTTP/1.1\r\nhost: a\r\n\r\n`), `${r.name}: its body was not forwarded whole`)
      }
    }
  })

  test('to a route lb answers itself (401): the backend never sees the request inside a chunk', async () => {
    const runs = await campaign('/priv')
    assert.deepEqual(hiddenSeen(), [], 'hidden requests forwarded')
    for (const r of runs) {
      assert.ok(r.closed, `${r.name}${r.split ? ' (split)' : ''}: the connection stays open: ${JSON.stringify(r.text)}`)
      const answers = r.text.match(/^HTTP\/1\.1 \d{3}/gm) ?? []
      assert.ok(answers.length <= 1, `${r.name}${r.split ? ' (split)' : ''}: more than one answer: ${JSON.stringify(r.text)}`)
      if (answers.length === 1) assert.match(r.text, /^HTTP\/1\.1 (401|400) /, `${r.name}: ${JSON.stringify(r.text)}`)
    }
    assert.ok(runs.some((r) => /^HTTP\/1\.1 401 /.test(r.text)), 'no 401 at all')
  })

  test('a keep-alive client that uploads chunked: served, told the connection closes, and its next request goes on a new one', async () => {
    const body = 'hello'
    const head = `POST /keep/1 HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n${hex(body.length)}\r\n${body}\r\n0\r\n\r\n`
    const a = await exchange(lb.port, [head, 'GET /keep/2 HTTP/1.1\r\nhost: a\r\n\r\n'], { waitClose: true, ms: 2000 })
    assert.equal(a.status, 200)
    assert.match(a.responses[0]!.head, /\r\nconnection: close/i)
    assert.ok(a.closed)
    assert.equal(a.responses.length, 1, 'one answer, then the close')
    assert.ok(backend.heads.some((h) => h.startsWith('POST /keep/1 ')))
    assert.ok(!backend.heads.some((h) => h.startsWith('GET /keep/2 ')), 'nothing after a chunked body on its connection')
  })

  test('a Content-Length body keeps the connection open (only chunked bodies close it)', async () => {
    const a = await exchange(lb.port, ['POST /cl/1 HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello', 'GET /cl/2 HTTP/1.1\r\nhost: a\r\n\r\n'], { ms: 2000 })
    assert.equal(a.responses.length, 2, a.text)
    assert.ok(!/\r\nconnection: close/i.test(a.responses[0]!.head))
  })
})
