// grpcWeb (Traefik's middleware): a browser's gRPC-Web calls, as the grpc-web
// JavaScript client frames them (grpc/grpc PROTOCOL-WEB.md), over HTTP/1.1
// through lb to a @grpc/grpc-js server that speaks only gRPC. Binary and base64
// text modes, unary and server streaming, the trailers as the body's last frame,
// a server error (Trailers-Only: grpc-status in the headers), lb's own error
// (no server) as grpc-status 14, the CORS preflight and headers for allowed
// origins only, and a router without the middleware passing requests untouched.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { type Lb, freePort, request, startLb } from '../helpers.js'
import { def, serveGrpc } from './grpc-service.js'
import { problems, oneMiddleware } from '../plugins/setup.js'

/** One gRPC message: flag 0, 4-byte length, payload. */
const frame = (payload: string): Buffer => {
  const p = Buffer.from(payload)
  const f = Buffer.alloc(5 + p.length)
  f.writeUInt32BE(p.length, 1)
  p.copy(f, 5)
  return f
}

/** The frames of a gRPC-Web body: messages, then the trailers frame (flag 0x80) as a header map. */
function frames (body: Buffer): { messages: string[], trailers: Record<string, string> | null } {
  const messages: string[] = []
  let trailers: Record<string, string> | null = null
  for (let at = 0; at < body.length;) {
    const flag = body[at]!
    const len = body.readUInt32BE(at + 1)
    const payload = body.subarray(at + 5, at + 5 + len).toString()
    if ((flag & 0x80) !== 0) {
      trailers = Object.fromEntries(payload.split('\r\n').filter((l) => l !== '').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]))
    } else messages.push(payload)
    at += 5 + len
  }
  return { messages, trailers }
}

describe('grpcWeb: config validation', () => {
  test('allow_origins are origins or "*"', () => {
    assert.match(problems(oneMiddleware('type = "grpcWeb"\nallow_origins = ["example.com"]')), /middlewares\.m\.allow_origins\[0\]: expected an origin like "https:\/\/app\.example\.com", or "\*"/)
  })
})

describe('gRPC-Web through lb', () => {
  let server: grpc.Server, lb: Lb
  const call = async (path: string, body: Buffer | string, contentType: string, extra: Record<string, string> = {}): Promise<{ status: number, headers: Record<string, unknown>, raw: Buffer }> => {
    const res = await fetch(`${lb.url}${path}`, { method: 'POST', headers: { 'content-type': contentType, 'x-grpc-web': '1', origin: 'https://app.example', ...extra }, body: typeof body === 'string' ? body : new Uint8Array(body) })
    return { status: res.status, headers: Object.fromEntries(res.headers), raw: Buffer.from(await res.arrayBuffer()) }
  }

  before(async () => {
    ;({ server } = await serveGrpc({ Echo: def('/t.T/Echo'), Count: def('/t.T/Count', false, true), Fail: def('/t.T/Fail') }, {
      Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.concat([Buffer.from('echo:'), c.request])),
      Count: (c: grpc.ServerWritableStream<Buffer, Buffer>) => { for (let i = 0; i < 3; i++) c.write(Buffer.from(`n${i}`)); c.end() },
      Fail: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb({ code: grpc.status.NOT_FOUND, details: 'no such thing' }),
    }).then(async (s) => {
      const dead = await freePort()
      lb = await startLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[middlewares.web]
type = "grpcWeb"
allow_origins = ["https://app.example"]
[routers.grpc]
rule = "PathPrefix(\`/t.T/\`)"
service = "grpc"
middlewares = ["web"]
[routers.plain]
rule = "PathPrefix(\`/plain/\`)"
service = "grpc"
[routers.dead]
rule = "PathPrefix(\`/dead.D/\`)"
service = "dead"
middlewares = ["web"]
[services.grpc]
protocol = "h2c"
[[services.grpc.servers]]
address = "127.0.0.1:${s.port}"
check = false
[services.dead]
protocol = "h2c"
retries = 0
[[services.dead.servers]]
address = "127.0.0.1:${dead}"
check = false
`)
      return s
    }))
  })
  after(async () => { await lb?.stop(); server?.forceShutdown() })

  test('binary: a unary call; the reply message, then the trailers frame; CORS headers for the allowed origin', async () => {
    const r = await call('/t.T/Echo', frame('hi'), 'application/grpc-web+proto')
    assert.equal(r.status, 200)
    assert.equal(r.headers['content-type'], 'application/grpc-web+proto')
    assert.equal(r.headers['access-control-allow-origin'], 'https://app.example')
    assert.match(String(r.headers['access-control-expose-headers']), /grpc-status/)
    const f = frames(r.raw)
    assert.deepEqual(f.messages, ['echo:hi'])
    assert.equal(f.trailers?.['grpc-status'], '0')
  })

  test('text (base64) mode, server streaming: three messages and the trailers, all base64', async () => {
    const r = await call('/t.T/Count', frame('').toString('base64'), 'application/grpc-web-text')
    assert.equal(r.status, 200)
    assert.match(String(r.headers['content-type']), /^application\/grpc-web-text(\+proto)?$/) // the server's +proto suffix kept
    // the body is base64 in pieces, each padded: decoded four characters at a time, as grpc-web's client does
    const text = r.raw.toString('latin1')
    const bytes = Buffer.concat((text.match(/.{1,4}/g) ?? []).map((g) => Buffer.from(g, 'base64')))
    const f = frames(bytes)
    assert.deepEqual(f.messages, ['n0', 'n1', 'n2'])
    assert.equal(f.trailers?.['grpc-status'], '0')
  })

  test('a server error: grpc-status and grpc-message reach the browser (headers of a Trailers-Only answer)', async () => {
    const r = await call('/t.T/Fail', frame('x'), 'application/grpc-web+proto')
    assert.equal(r.status, 200)
    const f = frames(r.raw)
    const status = r.headers['grpc-status'] ?? f.trailers?.['grpc-status']
    assert.equal(status, String(grpc.status.NOT_FOUND))
    assert.equal(decodeURIComponent(String(r.headers['grpc-message'] ?? f.trailers?.['grpc-message'])), 'no such thing')
  })

  test('lb\'s own error (no server answers) is grpc-status 14 for a gRPC-Web client, with its CORS headers', async () => {
    const r = await call('/dead.D/X', frame('x'), 'application/grpc-web+proto')
    assert.equal(r.status, 200)
    assert.equal(r.headers['grpc-status'], '14')
    assert.equal(r.headers['content-type'], 'application/grpc-web+proto')
    assert.equal(r.headers['access-control-allow-origin'], 'https://app.example')
  })

  test('the CORS preflight is answered by lb, for allowed origins only', async () => {
    const pre = (origin: string): ReturnType<typeof request> => request(`${lb.url}/t.T/Echo`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-grpc-web' } })
    const ok = await pre('https://app.example')
    assert.equal(ok.status, 204)
    assert.equal(ok.headers['access-control-allow-origin'], 'https://app.example')
    assert.match(String(ok.headers['access-control-allow-headers']), /x-grpc-web/)
    const other = await pre('https://evil.example')
    assert.equal(other.status, 204)
    assert.equal(other.headers['access-control-allow-origin'], undefined)
    // a call from another origin is served but carries no CORS header: the browser will not hand it to the page
    const r = await call('/t.T/Echo', frame('hi'), 'application/grpc-web+proto', { origin: 'https://evil.example' })
    assert.equal(r.headers['access-control-allow-origin'], undefined)
  })

  test('without the middleware a gRPC-Web request goes to the server as it came (the server may speak gRPC-Web itself)', async () => {
    const r = await call('/plain/t.T/Echo', frame('hi'), 'application/grpc-web+proto')
    // grpc-js does not speak gRPC-Web: it refuses the content-type
    assert.notEqual(frames(r.raw).messages[0], 'echo:hi')
  })
})
