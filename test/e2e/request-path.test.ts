// The request path and the Host check, through the real balancer over
// raw sockets (a client library would clean the path up before sending it).
// The file server is Python's http.server, a real backend that normalises
// paths itself: before lb normalised them, /x/../private/secret.txt was routed
// by the catch-all router past the /private/ router's basicAuth and served.
import { strict as assert } from 'node:assert'
import { type ChildProcess, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, childPort, startBackend, startLb } from '../helpers.js'
import { type RawResponse, exchange } from './raw-http.js'

const SECRET = 'the secret of private/secret.txt\n'

/** Sends `head` (request line and headers, without the final CRLF) with Connection: close over a raw socket; the answer. */
async function raw (port: number, head: string | Buffer): Promise<RawResponse> {
  const bytes = typeof head === 'string' ? Buffer.from(head, 'latin1') : head
  const a = await exchange(port, Buffer.concat([bytes, Buffer.from('\r\nconnection: close\r\n\r\n')]), { ms: 5000 })
  assert.ok(a.responses.length > 0, `no answer to ${JSON.stringify(bytes.toString('latin1'))}: ${JSON.stringify(a.text)}`)
  return a.responses[0]!
}

/** `python3 -m http.server` serving `dir` on port 0; resolves with the port it prints once listening. */
async function startFileServer (dir: string): Promise<{ port: number, proc: ChildProcess }> {
  // -u: unbuffered, so the "Serving HTTP on 127.0.0.1 port N" line comes out at once
  const proc = spawn('python3', ['-u', '-m', 'http.server', '0', '--bind', '127.0.0.1', '--directory', dir], { stdio: ['ignore', 'pipe', 'ignore'] })
  try {
    return { port: await childPort(proc, /Serving HTTP on \S+ port (\d+)/), proc }
  } catch (err) {
    proc.kill('SIGKILL')
    throw err
  }
}

const sha = (pw: string): string => '{SHA}' + createHash('sha1').update(pw).digest('base64')

function config (files: number, api: string, echo: string, entrypoints: string): string {
  return `${entrypoints}
[routers.private]
rule = "PathPrefix(\`/private/\`)"
service = "files"
middlewares = ["auth"]

[routers.all]
rule = "PathPrefix(\`/\`)"
service = "files"

[routers.api]
rule = "PathPrefix(\`/api/\`)"
service = "api"

[routers.echo]
rule = "PathPrefix(\`/echo/\`)"
service = "echo"

[routers.site]
rule = "Host(\`example.com\`) && PathPrefix(\`/site/\`)"
service = "echo"

[routers.go]
rule = "PathPrefix(\`/go/\`)"
service = "echo"
middlewares = ["to-https"]

[middlewares.auth]
type = "basicAuth"
users = ["alice:${sha('pw')}"]

[middlewares.to-https]
type = "redirectScheme"

[services.files]
[[services.files.servers]]
address = "127.0.0.1:${files}"
check = false

[services.api]
[[services.api.servers]]
address = "${api}"
check = false

[services.echo]
[[services.echo.servers]]
address = "${echo}"
check = false
`
}

describe('request paths and Host through the balancer (default settings)', () => {
  let dir: string, files: { port: number, proc: ChildProcess }, api: Backend, echo: Backend, lb: Lb
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lb-files-'))
    mkdirSync(join(dir, 'private'))
    writeFileSync(join(dir, 'private', 'secret.txt'), SECRET)
    writeFileSync(join(dir, 'secret'), 'the public file /secret\n')
    files = await startFileServer(dir)
    api = await startBackend('api')
    echo = await startBackend('echo')
    lb = await startLb(config(files.port, api.address, echo.address, '[entrypoints.web]\naddress = "127.0.0.1:{{PORT}}"\n'))
  })
  after(async () => {
    await lb?.stop()
    files?.proc.kill()
    await api?.close()
    await echo?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  test('the backend does serve the secret to a request with credentials (the setup is real)', async () => {
    const ok = await raw(lb.port, `GET /private/secret.txt HTTP/1.1\r\nhost: a\r\nauthorization: Basic ${Buffer.from('alice:pw').toString('base64')}`)
    assert.equal(ok.status, 200)
    assert.equal(ok.body, SECRET)
    // and, asked directly, it normalises the paths below itself: lb must route them as it serves them
    assert.equal((await raw(files.port, 'GET /x/../private/secret.txt HTTP/1.1\r\nhost: a')).body, SECRET)
  })

  test('paths that a normalising backend reads as /private/... are routed to the /private/ router: 401, never the file', async () => {
    for (const path of ['/private/secret.txt', '/x/../private/secret.txt', '/%70rivate/secret.txt', '//private/secret.txt',
      '/./private/secret.txt', '/%2e/private/secret.txt', '/x/%2E%2E/private/secret.txt', '///private//secret.txt', '/PRIVATE/../private/secret.txt']) {
      const r = await raw(lb.port, `GET ${path} HTTP/1.1\r\nhost: a`)
      assert.equal(r.status, 401, path)
      assert.doesNotMatch(r.body, /secret of/, path)
    }
  })

  test('/api/../secret is not routed to the api service: it is /secret, served by the catch-all router', async () => {
    const before = api.requests.length
    const r = await raw(lb.port, 'GET /api/../secret HTTP/1.1\r\nhost: a')
    assert.equal(r.status, 200)
    assert.equal(r.body, 'the public file /secret\n')
    assert.equal(api.requests.length, before)
  })

  test('the backend receives the normalised path, and the query string byte for byte', async () => {
    const query = 'a=%2F%2f..%2e&b=/../x//y&c=%zz&d=\\&e=%00&f=%7E+%20;#'
    const r = await raw(lb.port, `GET /echo/./x/../%7Euser//%c3%a9?${query} HTTP/1.1\r\nhost: a`)
    assert.equal(r.status, 200)
    assert.equal(echo.requests.at(-1)!.url, `/echo/~user/%C3%A9?${query}`)
  })

  test('each ambiguous escape is refused with 400 naming it; the backend sees nothing', async () => {
    const seen = echo.requests.length
    for (const [esc, name] of [['%2F', '"/"'], ['%2f', '"/"'], ['%5C', 'backslash'], ['%00', 'NUL'], ['%25', '"%"'], ['%3B', '";"'], ['%3F', '"?"'], ['%23', '"#"']]) {
      const r = await raw(lb.port, `GET /echo/a${esc!}b HTTP/1.1\r\nhost: a`)
      assert.equal(r.status, 400, esc)
      assert.equal(r.body, `bad request path: encoded ${name!} (${esc!.toUpperCase()}) is not allowed\n`, esc)
    }
    assert.equal(echo.requests.length, seen)
  })

  test('raw backslash, DEL, "#", non-ASCII, malformed escapes, ".." above the root and "..;" are refused with 400 naming them', async () => {
    const cases: Array<[string | Buffer, string]> = [
      ['GET /echo/..\\..\\private HTTP/1.1\r\nhost: a', 'backslash ("\\")'],
      ['GET /echo/a\x7fb HTTP/1.1\r\nhost: a', 'control character 0x7F'],
      ['GET /private/secret.txt#/../../echo/ HTTP/1.1\r\nhost: a', '"#" (a fragment is never sent to a server)'],
      [Buffer.from('GET /echo/caf\u00e9 HTTP/1.1\r\nhost: a', 'utf8'), 'non-ASCII character U+00E9 (send it percent-encoded)'],
      [Buffer.concat([Buffer.from('GET /echo/'), Buffer.from([0xff]), Buffer.from(' HTTP/1.1\r\nhost: a')]), 'non-ASCII character U+FFFD (send it percent-encoded)'],
      ['GET /echo/%zz HTTP/1.1\r\nhost: a', 'malformed percent-encoding "%zz"'],
      ['GET /../private/secret.txt HTTP/1.1\r\nhost: a', '".." above the root'],
      ['GET /echo/../../etc/passwd HTTP/1.1\r\nhost: a', '".." above the root'],
      // a servlet container behind would serve /private/secret.txt past the /echo/ router
      ['GET /echo/..;/private/secret.txt HTTP/1.1\r\nhost: a', 'a dot segment with parameters "..;"'],
    ]
    const seen = echo.requests.length
    for (const [head, why] of cases) {
      const r = await raw(lb.port, head)
      assert.equal(r.status, 400, why)
      assert.equal(r.body, `bad request path: ${why}\n`)
    }
    assert.equal(echo.requests.length, seen)
  })

  test('a WebSocket upgrade is normalised and routed the same way', async () => {
    const r = await raw(lb.port, 'GET /x/../private/secret.txt HTTP/1.1\r\nhost: a\r\nupgrade: websocket\r\nconnection: Upgrade\r\n' +
      'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13')
    assert.equal(r.status, 401)
    const bad = await raw(lb.port, 'GET /echo/%2F HTTP/1.1\r\nhost: a\r\nupgrade: websocket\r\nconnection: Upgrade\r\n' +
      'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13')
    assert.equal(bad.status, 400)
  })

  test('Host values that are not hosts get 400 and reach neither a backend nor a redirect Location', async () => {
    const cases: Array<[string | Buffer, string]> = [
      ['evil.com/x', 'invalid Host header: "/" is not allowed in a host name'],
      ['good evil', 'invalid Host header: a space is not allowed in a host name'],
      [Buffer.from('ex\u00e9.com', 'utf8'), 'invalid Host header: non-ASCII character U+00E9 is not allowed in a host name'],
      ['a.com:80/x', 'invalid Host header: port "80/x" is not a number up to 65535'],
      ['user@evil.com', 'invalid Host header: "@" is not allowed in a host name'],
      ['', 'invalid Host header: empty'],
    ]
    const seen = echo.requests.length
    for (const [host, why] of cases) {
      for (const path of ['/echo/p', '/go/p']) {
        const head = Buffer.concat([Buffer.from(`GET ${path} HTTP/1.1\r\nhost: `), typeof host === 'string' ? Buffer.from(host) : host])
        const r = await raw(lb.port, head)
        assert.equal(r.status, 400, `${String(host)} ${path}`)
        assert.equal(r.body, `bad request: ${why}\n`)
        assert.doesNotMatch(r.head, /location/i)
      }
    }
    const two = await raw(lb.port, 'GET /echo/p HTTP/1.1\r\nhost: a.example\r\nhost: evil.com')
    assert.equal(two.status, 400)
    assert.match(two.body, /^(bad request: more than one Host header\n)?$/) // uWS 20.57 answers this one itself, without a body
    assert.equal(echo.requests.length, seen)
    // a valid one is redirected with the normalised path
    const ok = await raw(lb.port, 'GET /go/./a/../p?q=%2F HTTP/1.1\r\nhost: Shop.Example:8080')
    assert.equal(ok.status, 302)
    assert.match(ok.head, /\r\nlocation: https:\/\/shop\.example\/go\/p\?q=%2F(\r\n|$)/)
  })

  test('Host() matches case-insensitively and with the trailing dot of a fully qualified name', async () => {
    for (const host of ['example.com', 'Example.COM', 'Example.COM.', 'example.com.:8080']) {
      const r = await raw(lb.port, `GET /site/x HTTP/1.1\r\nhost: ${host}`)
      assert.equal(r.status, 200, host)
      assert.equal(r.body, 'echo\n', host)
      assert.equal(echo.requests.at(-1)!.headers.host, host, 'the Host header itself is forwarded as sent')
    }
    // another host is not the Host() router's: the catch-all's file server answers 404
    assert.equal((await raw(lb.port, 'GET /site/x HTTP/1.1\r\nhost: example.org')).status, 404)
  })
})

describe('request path options flip their behaviour', () => {
  let dir: string, files: { port: number, proc: ChildProcess }, echo: Backend, lb: Lb, loose: number
  const ESCAPES = ['%2F', '%5C', '%00', '%25', '%3B', '%3F', '%23']
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lb-files-'))
    files = await startFileServer(dir)
    echo = await startBackend('echo')
    lb = await startLb(config(files.port, echo.address, echo.address, `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"

[entrypoints.loose]
address = "127.0.0.1:0"
merge_slashes = false
[entrypoints.loose.encoded_characters]
allow_encoded_slash = true
allow_encoded_back_slash = true
allow_encoded_null_character = true
allow_encoded_percent = true
allow_encoded_semicolon = true
allow_encoded_question_mark = true
allow_encoded_hash = true
`))
    loose = await lb.portOf('loose')
  })
  after(async () => {
    await lb?.stop()
    files?.proc.kill()
    await echo?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  test('each escape refused on the default entry point is forwarded, upper-cased and still encoded, where its option allows it', async () => {
    for (const esc of ESCAPES) {
      assert.equal((await raw(lb.port, `GET /echo/a${esc.toLowerCase()}b/./c HTTP/1.1\r\nhost: a`)).status, 400, esc)
      const r = await raw(loose, `GET /echo/a${esc.toLowerCase()}b/./c HTTP/1.1\r\nhost: a`)
      assert.equal(r.status, 200, esc)
      assert.equal(echo.requests.at(-1)!.url, `/echo/a${esc}b/c`)
    }
  })

  test('merge_slashes = false keeps repeated slashes; the default merges them', async () => {
    await raw(lb.port, 'GET /echo//a///b HTTP/1.1\r\nhost: a')
    assert.equal(echo.requests.at(-1)!.url, '/echo/a/b')
    await raw(loose, 'GET /echo//a///b HTTP/1.1\r\nhost: a')
    assert.equal(echo.requests.at(-1)!.url, '/echo//a///b')
  })
})
