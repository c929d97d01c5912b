// protocol = "h2": HTTP/2 over TLS (ALPN h2) to the servers, verified with the
// service's [services.X.tls] (ca_file, server_name, insecure_skip_verify). A
// node:http2 secure server sees ALPN h2 and :scheme https; a grpc-js server
// with TLS credentials, whose certificate names only other.test, takes calls
// and gRPC health checks through server_name; a server whose certificate lb
// cannot verify takes none unless insecure_skip_verify says so.
import { strict as assert } from 'node:assert'
import { readFileSync } from 'node:fs'
import http2 from 'node:http2'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { type Lb, firstChecksPassed, request, startLb } from '../helpers.js'
import { type Certs, makeCerts } from '../tls/certs.js'
import { HEALTH_CHECK, SERVING, def, serveGrpc, unary } from './grpc-service.js'

let certs: Certs
/** what the node:http2 server answers at /health */
let health = 200
let h2server: http2.Http2SecureServer
let grpcServer: grpc.Server
let lb: Lb
let client: grpc.Client

const call = (method: string): Promise<{ code: number, value: string }> => unary(client, method, 'hi')
  .then((v) => ({ code: 0, value: v.toString() }), (err: grpc.ServiceError) => ({ code: err.code, value: err.details }))

before(async () => {
  certs = makeCerts()
  h2server = http2.createSecureServer({ key: readFileSync(certs.server.key), cert: readFileSync(certs.server.cert) }, (req, res) => {
    if (req.url === '/health') { res.writeHead(health).end(); return }
    const sock = req.socket as unknown as { alpnProtocol: string }
    res.end(JSON.stringify({ alpn: sock.alpnProtocol, scheme: req.scheme, path: req.url, version: req.httpVersion }))
  })
  await new Promise<void>((resolve) => h2server.listen(0, '127.0.0.1', resolve))
  const h2port = (h2server.address() as AddressInfo).port

  // one Echo per lb service (its router matches the gRPC service name)
  const names = ['grpcs', 'untrusted', 'wrongname', 'insecure']
  const echo = (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>): void => cb(null, Buffer.concat([Buffer.from('tls:'), c.request]))
  // its certificate names other.test only: lb reaches it at 127.0.0.1 and must ask for other.test
  const creds = grpc.ServerCredentials.createSsl(null, [{ private_key: readFileSync(certs.other.key), cert_chain: readFileSync(certs.other.cert) }], false)
  const g = await serveGrpc(Object.fromEntries([...names.map((n) => [n, def(`/${n}.T/Echo`)]), ['Check', HEALTH_CHECK]]),
    Object.fromEntries([...names.map((n) => [n, echo]), ['Check', (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, SERVING)]]), '127.0.0.1:0', creds)
  grpcServer = g.server
  const gport = g.port

  const service = (name: string, port: number, tls: string, check: false | 'grpc' | 'http' = false): string => `
[routers.${name}]
rule = "PathPrefix(\`/${name}.\`) || PathPrefix(\`/${name}/\`)"
service = "${name}"
[services.${name}]
protocol = "h2"
retries = 0
${check !== false ? `[services.${name}.health_check]\ntype = "${check}"\ninterval = "100ms"\nfall = 2\n` : ''}[services.${name}.tls]
${tls}
[[services.${name}.servers]]
name = "${name}1"
address = "127.0.0.1:${port}"
check = ${check !== false}
`
  lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.grpc]
address = "127.0.0.1:0"
protocol = "h2c"
${service('plain', h2port, `ca_file = "${certs.ca}"`)}
${service('grpcs', gport, `ca_file = "${certs.ca}"\nserver_name = "other.test"`, 'grpc')}
${service('checked', h2port, `ca_file = "${certs.ca}"`, 'http')}
${service('untrusted', gport, 'server_name = "other.test"')}
${service('wrongname', gport, `ca_file = "${certs.ca}"`)}
${service('insecure', gport, 'insecure_skip_verify = true')}
`)
  client = new grpc.Client(`127.0.0.1:${await lb.portOf('grpc')}`, grpc.credentials.createInsecure())
})

after(async () => {
  client?.close()
  await lb?.stop()
  grpcServer?.forceShutdown()
  h2server?.close()
})

describe('protocol = "h2": HTTP/2 over TLS to the servers', () => {
  test('a node:http2 secure server gets the request over TLS with ALPN h2 and :scheme https (from an HTTP/1.1 client)', async () => {
    const r = await request(`${lb.url}/plain/x?y=1`)
    assert.equal(r.status, 200, r.body)
    assert.deepEqual(JSON.parse(r.body), { alpn: 'h2', scheme: 'https', path: '/plain/x?y=1', version: '2.0' })
  })

  test('a grpc-js server with TLS credentials takes calls, verified against ca_file with server_name', async () => {
    assert.deepEqual(await call('/grpcs.T/Echo'), { code: 0, value: 'tls:hi' })
  })

  test('its gRPC health checks go over the same TLS', async () => {
    await firstChecksPassed(lb, ['grpcs1'])
  })

  test('a certificate lb cannot verify (no ca_file, or a name it does not hold) takes no call: 14 UNAVAILABLE', async () => {
    assert.equal((await call('/untrusted.T/Echo')).code, grpc.status.UNAVAILABLE)
    assert.equal((await call('/wrongname.T/Echo')).code, grpc.status.UNAVAILABLE) // 127.0.0.1 is not other.test
  })

  test('an http health check (the default type) GETs its path over the same HTTP/2 and TLS, not HTTP/1.1', async () => {
    await firstChecksPassed(lb, ['checked1'])
    health = 503
    assert.match(await lb.logMatching(/"msg":"server DOWN"[^\n]*"server":"checked1"[^\n]*/), /GET \/health → 503 \(expected 200\)/)
    health = 200
    await lb.logMatching(/"msg":"server UP"[^\n]*"server":"checked1"/)
  })

  test('insecure_skip_verify = true accepts it', async () => {
    assert.deepEqual(await call('/insecure.T/Echo'), { code: 0, value: 'tls:hi' })
  })
})
