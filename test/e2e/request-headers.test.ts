// Request header semantics, raw bytes both sides of a real
// 2-worker balancer: requests whose framing or identity two parties could read
// differently are refused before routing (400, or 501 for a coding lb does not
// implement), the answer closes the connection and is access-logged, and the
// backend never receives a byte of them; the headers Connection names are not
// forwarded; every X-Forwarded-For line is kept; Basic credentials decode
// strictly; Expect: 100-continue over max_body is refused before the body.
import { strict as assert } from 'node:assert'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Lb, ROOT, startLb, waitFor } from '../helpers.js'
import { mwConfig } from '../plugins/setup.js'
import { OK, type RawBackend, exchange, startRawBackend } from './raw-http.js'

const CAROL = readFileSync(join(ROOT, 'test', 'fixtures', 'auth', 'users.htpasswd'), 'utf8').split('\n').find((l) => l.startsWith('carol:'))!
const CAROL_B64 = Buffer.from('carol:sésame ouvre-toi', 'utf8').toString('base64')

describe('request headers', () => {
  let backend: RawBackend, lb: Lb
  let n = 0
  /** a path no other request uses: the backend never seeing it proves the request was not forwarded */
  const fresh = (): string => `/case-${++n}`

  before(async () => {
    backend = await startRawBackend(() => OK)
    lb = await startLb('[global]\nworkers = 2\naccess_log = "{{DIR}}/access.log"\n' + mwConfig(backend.address, `
[limits]
max_body = "1k"

[middlewares.auth]
type = "basicAuth"
users = ["${CAROL.replaceAll('$', '\\u0024')}"]
`, { '/auth': ['auth'], '/': [] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  /** Sends `head` (request line from `path`) and asserts a closing `status` answer naming the problem, and nothing forwarded. */
  async function refused (path: string, rest: string, status: number, message: RegExp): Promise<void> {
    const a = await exchange(lb.port, `POST ${path} HTTP/1.1\r\nhost: a\r\n${rest}`, { waitClose: true })
    assert.equal(a.status, status, `${JSON.stringify(rest)} answered ${JSON.stringify(a.text)}`)
    assert.match(a.responses[0]!.body, message)
    assert.match(a.responses[0]!.head, /\r\nconnection: close/i)
    assert.ok(a.closed, 'the connection is closed after the answer')
    assert.ok(!backend.received().includes(path), `${JSON.stringify(rest)} reached the backend`)
  }

  test('conflicting or repeated Content-Length: 400 and close, never forwarded', async () => {
    await refused(fresh(), 'content-length: 3\r\ncontent-length: 30\r\n\r\nabc', 400, /^bad request: conflicting Content-Length values 3 and 30\n$/)
    await refused(fresh(), 'content-length: 30\r\ncontent-length: 3\r\n\r\nabc', 400, /conflicting Content-Length values 30 and 3/)
    // identical values are refused too (lb's choice, as nginx and llhttp)
    await refused(fresh(), 'content-length: 3\r\ncontent-length: 3\r\n\r\nabc', 400, /^bad request: Content-Length 3 sent twice\n$/)
    // an empty Content-Length beside chunked, in either order
    await refused(fresh(), 'transfer-encoding: chunked\r\ncontent-length:\r\n\r\n0\r\n\r\n', 400, /^bad request: invalid Content-Length ""\n$/)
    await refused(fresh(), 'content-length:\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n', 400, /invalid Content-Length ""/)
    // a list: uWS closes the connection itself, without an answer (a limit of this build); never forwarded either way
    for (const list of ['3, 30', '3, 3']) {
      const path = fresh()
      const a = await exchange(lb.port, `POST ${path} HTTP/1.1\r\nhost: a\r\ncontent-length: ${list}\r\n\r\nabc`, { waitClose: true })
      assert.ok(a.closed && (a.status === 0 || a.status === 400), a.text)
      assert.ok(!backend.received().includes(path))
    }
  })

  test('two Host or two Authorization headers: 400 and close', async () => {
    // uWS 20.57 answers two Host lines itself (400, no body) before lb sees them; lb's own check stays for any build that does not
    await refused(fresh(), 'host: b\r\ncontent-length: 0\r\n\r\n', 400, /^(bad request: more than one Host header\n)?$/)
    await refused(fresh(), 'authorization: Basic a\r\nauthorization: Basic b\r\ncontent-length: 0\r\n\r\n', 400, /^bad request: more than one Authorization header\n$/)
    // also where basicAuth would check only the first
    await refused('/auth' + fresh(), `authorization: Basic ${CAROL_B64}\r\nauthorization: Basic b\r\ncontent-length: 0\r\n\r\n`, 400, /more than one Authorization/)
  })

  test('Transfer-Encoding other than a single chunked: 501 and close', async () => {
    for (const te of ['chunked, identity', 'gzip, chunked', 'xchunked', 'identity', 'chunked;x=1']) {
      await refused(fresh(), `transfer-encoding: ${te}\r\n\r\n0\r\n\r\n`, 501,
        new RegExp(`^not implemented: Transfer-Encoding ${JSON.stringify(te)} \\(only a single "chunked" is\\)\\n$`))
    }
    await refused(fresh(), 'transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n', 400, /more than one Transfer-Encoding header/)
    // chunked in any case is chunked
    const path = fresh()
    const a = await exchange(lb.port, `POST ${path} HTTP/1.1\r\nhost: a\r\ntransfer-encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`)
    assert.equal(a.status, 200)
    assert.match(backend.received(), new RegExp(`POST ${path} HTTP/1.1\\r\\n[^]*transfer-encoding: chunked\\r\\n[^]*\\r\\n\\r\\n3\\r\\nabc\\r\\n0\\r\\n\\r\\n`))
  })

  test('a control character in a header value: 400 and close (DEL from lb, the others from uWS); never forwarded (RFC 9110 §5.5)', async () => {
    await refused(fresh(), 'x-a: a\x7fb\r\ncontent-length: 0\r\n\r\n', 400, /^bad request: control character 0x7F in the value of header x-a\n$/)
    // the others in parallel: uWS answers them 400 itself (README "Request forms at the edge")
    const controls = [...Array(0x20).keys()].filter((c) => c !== 0 && c !== 0x09 && c !== 0x0a && c !== 0x0d)
    const paths = controls.map(() => fresh())
    const answers = await Promise.all(controls.map((c, i) =>
      exchange(lb.port, `GET ${paths[i]!} HTTP/1.1\r\nhost: a\r\nx-a: a${String.fromCharCode(c)}b\r\n\r\n`, { waitClose: true, ms: 1000 })))
    controls.forEach((c, i) => {
      assert.ok(!backend.received().includes(paths[i]!), `0x${c.toString(16)} was forwarded`)
      const a = answers[i]!
      assert.ok(a.status === 400 && a.closed, `0x${c.toString(16)}: ${a.text}`)
    })
    // HTAB is allowed inside a value
    const path = fresh()
    assert.equal((await exchange(lb.port, `GET ${path} HTTP/1.1\r\nhost: a\r\nx-tab: a\tb\r\n\r\n`)).status, 200)
    assert.ok(backend.received().includes(`GET ${path} HTTP/1.1\r\nhost: a\r\nx-tab: a\tb\r\n`))
  })

  test('a method that is not a token: 400 and close, never forwarded', async () => {
    for (const method of ['\x7fGET', 'G\x80T', 'G"T']) {
      const path = fresh()
      const a = await exchange(lb.port, `${method} ${path} HTTP/1.1\r\nhost: a\r\n\r\n`, { waitClose: true })
      if (a.status === 0 || a.status === 505) continue // refused by uWS itself before lb (README "Request forms at the edge")
      assert.equal(a.status, 400, `${JSON.stringify(method)}: ${a.text}`)
      assert.match(a.responses[0]!.body, /^bad request: invalid method /)
      assert.ok(a.closed)
      assert.ok(!backend.received().includes(path), `${JSON.stringify(method)} reached the backend`)
    }
    assert.ok(!backend.received().includes('\x7fGET'))
  })

  test('refusals are access-logged with their status', async () => {
    const log = join(lb.dir, 'access.log')
    const refused400 = /"method":"POST","path":"\/case-1",[^\n]*"status":400/
    // each worker flushes its own lines every 100 ms: the two may come from different workers
    const text = await waitFor(() => {
      const t = readFileSync(log, 'utf8')
      return refused400.test(t) && /"status":501/.test(t) ? t : null
    }, 'the 400 and the 501 in the access log', 4000, 50).catch(() => readFileSync(log, 'utf8'))
    assert.match(text, refused400)
    assert.match(text, /"status":501/)
  })

  test('headers named in Connection are not forwarded, but Host, Content-Length and the X-Forwarded-* lb sets are', async () => {
    const path = fresh()
    const a = await exchange(lb.port, `POST ${path} HTTP/1.1\r\nhost: a\r\n` +
      'connection: keep-alive, X-Foo,x-bar ,  host, content-length, x-forwarded-for, x-real-ip, x-forwarded-proto\r\n' +
      'x-foo: hop\r\nx-bar: hop\r\nx-kept: yes\r\nx-forwarded-for: 9.9.9.9\r\nx-real-ip: 8.8.8.8\r\ncontent-length: 3\r\n\r\nabc')
    assert.equal(a.status, 200, a.text)
    const head = backend.heads.find((h) => h.startsWith(`POST ${path} `))!
    assert.equal(head, `POST ${path} HTTP/1.1\r\nhost: a\r\nx-kept: yes\r\ncontent-length: 3\r\n` +
      'x-real-ip: 127.0.0.1\r\nx-forwarded-for: 9.9.9.9, 127.0.0.1\r\nx-forwarded-proto: http')
    assert.ok(backend.received().includes(head + '\r\n\r\nabc'))
  })

  test('x-lb-user (the user lb tells its generation service) is never taken from a client, in either spelling', async () => {
    const path = fresh()
    const a = await exchange(lb.port, `GET ${path} HTTP/1.1\r\nhost: a\r\nx-lb-user: mallory\r\nx_lb_user: mallory\r\nx-kept: yes\r\n\r\n`)
    assert.equal(a.status, 200, a.text)
    const head = backend.heads.find((h) => h.startsWith(`GET ${path} `))!
    assert.ok(!head.includes('mallory'), head)
    assert.match(head, /x-kept: yes/)
  })

  test('WebSocket upgrades pass the same checks: refused before a server sees them, Connection-named headers dropped', async () => {
    const upgrade = (path: string, extra: string): string => `GET ${path} HTTP/1.1\r\nhost: a\r\nupgrade: websocket\r\n` +
      `sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n${extra}\r\n`
    const refusedPath = fresh()
    const a = await exchange(lb.port, upgrade(refusedPath, 'connection: Upgrade\r\nauthorization: a\r\nauthorization: b\r\n'), { waitClose: true })
    assert.equal(a.status, 400, a.text)
    assert.match(a.responses[0]!.body, /more than one Authorization header/)
    assert.ok(!backend.received().includes(refusedPath))
    // the raw backend answers 200, not 101: lb relays that answer, after forwarding the upgrade request
    const path = fresh()
    await exchange(lb.port, upgrade(path, 'connection: Upgrade, X-Foo\r\nx-foo: hop\r\nx-kept: yes\r\n'))
    const head = backend.heads.find((h) => h.startsWith(`GET ${path} `))!
    assert.match(head, /\r\nx-kept: yes\r\n/)
    assert.doesNotMatch(head, /x-foo/i)
  })

  test('every X-Forwarded-For line is kept, in order, then the client', async () => {
    const path = fresh()
    await exchange(lb.port, `GET ${path} HTTP/1.1\r\nhost: a\r\nx-forwarded-for: 1.1.1.1\r\nx-forwarded-for: 2.2.2.2, 3.3.3.3\r\n\r\n`)
    const head = backend.heads.find((h) => h.startsWith(`GET ${path} `))!
    assert.match(head, /\r\nx-forwarded-for: 1\.1\.1\.1, 2\.2\.2\.2, 3\.3\.3\.3, 127\.0\.0\.1(\r\n|$)/)
    assert.equal(head.match(/x-forwarded-for/g)!.length, 1)
  })

  test('Basic credentials decode strictly: trailing junk or bad padding is 401', async () => {
    const path = '/auth' + fresh()
    const get = async (cred: string): Promise<number> =>
      (await exchange(lb.port, `GET ${path} HTTP/1.1\r\nhost: a\r\nauthorization: Basic ${cred}\r\n\r\n`)).status
    assert.equal(await get(CAROL_B64), 200)
    const bare = CAROL_B64.replace(/=+$/, '')
    assert.notEqual(bare, CAROL_B64, 'the fixture credential needs padding for the padding cases')
    for (const bad of [CAROL_B64 + 'junk', CAROL_B64 + '!', CAROL_B64 + '=', bare, bare + '===', CAROL_B64 + 'AA==']) {
      assert.equal(await get(bad), 401, JSON.stringify(bad))
    }
  })

  test('Expect: 100-continue with a Content-Length over max_body: 413 before the body, nothing forwarded', async () => {
    const path = fresh()
    // the body is never sent: the answer must come without it
    const a = await exchange(lb.port, `POST ${path} HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 5000\r\n\r\n`)
    assert.equal(a.status, 413, a.text)
    assert.match(a.responses[0]!.body, /request body larger than 1024 bytes/)
    assert.ok(!backend.received().includes(path))
    // uWS writes "100 Continue" itself before lb sees the request (README, "Request forms at the edge"): it precedes the 413
    assert.match(a.text, /^(HTTP\/1\.1 100 Continue\r\n\r\n)?HTTP\/1\.1 413 /)
  })
})
