// [tracing] over HTTP/2: an h2c client to an HTTP/1.1 backend, and gRPC
// (@grpc/grpc-js client and server) through an h2c service: the upstream
// request carries lb's traceparent, the span says HTTP/2.
import { strict as assert } from 'node:assert'
import http2 from 'node:http2'
import { after, before, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { type Backend, type Lb, startBackend, startLb, waitFor } from '../helpers.js'
import { def, serveGrpc } from '../h2/grpc-service.js'
import { type Collector, attr, startCollector } from './collector.js'
import { tracingSection } from './util.js'

const TRACE = '0af7651916cd43dd8448eb211c80319c'
const PARENT = 'b7ad6b7169203331'
const TP = `00-${TRACE}-${PARENT}-01`
const VALID_TP = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/

let backend: Backend
let collector: Collector
let grpcServer: grpc.Server
let lb: Lb
let grpcMeta: grpc.Metadata | null = null

before(async () => {
  backend = await startBackend('b1')
  collector = await startCollector()
  const g = await serveGrpc({ Echo: def('/t.T/Echo') }, {
    Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => { grpcMeta = call.metadata; cb(null, call.request) },
  })
  grpcServer = g.server
  lb = await startLb(`[global]
workers = 1
access_log = "off"
[entrypoints.h2]
address = "127.0.0.1:{{PORT}}"
protocol = "h2c"
[routers.grpc]
rule = "PathPrefix(\`/t.T/\`)"
service = "grpc"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.grpc]
protocol = "h2c"
[[services.grpc.servers]]
address = "127.0.0.1:${g.port}"
check = false
[services.web]
[[services.web.servers]]
address = "${backend.address}"
check = false
${tracingSection(collector.endpoint)}`)
})

after(async () => {
  grpcServer?.forceShutdown()
  await lb?.stop()
  await backend?.close()
  await collector?.close()
})

test('an HTTP/2 request to an HTTP/1.1 backend: lb\'s traceparent upstream, network.protocol.version 2', async () => {
  const session = http2.connect(lb.url)
  try {
    const status = await new Promise<number>((resolve, reject) => {
      const req = session.request({ ':path': '/h2', traceparent: TP })
      req.on('response', (h) => { req.resume(); req.on('end', () => resolve(Number(h[':status']))) })
      req.on('error', reject)
      req.end()
    })
    assert.equal(status, 200)
  } finally {
    session.close()
  }
  const h = backend.requests.find((r) => r.url === '/h2')?.headers
  const m = VALID_TP.exec(String(h?.traceparent))
  assert.ok(m !== null, `traceparent upstream: ${h?.traceparent}`)
  assert.equal(m[1], TRACE)
  const s = await waitFor(() => collector.spans.find((x) => attr(x, 'url.path') === '/h2'), 'the /h2 span', 10_000)
  assert.equal(attr(s, 'network.protocol.version'), '2')
  assert.equal(s.spanId, m[2])
  assert.equal(s.parentSpanId, PARENT)
})

test('a gRPC call through an h2c service: the server\'s metadata has lb\'s traceparent', async () => {
  const client = new grpc.Client(`127.0.0.1:${lb.port}`, grpc.credentials.createInsecure())
  try {
    const md = new grpc.Metadata()
    md.set('traceparent', TP)
    md.set('tracestate', 'congo=t61rcWkgMzE')
    const reply = await new Promise<Buffer>((resolve, reject) => {
      client.makeUnaryRequest('/t.T/Echo', (b: Buffer) => b, (b: Buffer) => b, Buffer.from('hi'), md, (err, v) => err !== null ? reject(err) : resolve(v!))
    })
    assert.equal(reply.toString(), 'hi')
  } finally {
    client.close()
  }
  const got = String(grpcMeta?.get('traceparent')[0])
  const m = VALID_TP.exec(got)
  assert.ok(m !== null, `traceparent at the gRPC server: ${got}`)
  assert.equal(m[1], TRACE)
  assert.notEqual(m[2], PARENT)
  assert.equal(String(grpcMeta?.get('tracestate')[0]), 'congo=t61rcWkgMzE')
  const s = await waitFor(() => collector.spans.find((x) => attr(x, 'url.path') === '/t.T/Echo'), 'the gRPC span', 10_000)
  assert.equal(s.name, 'POST grpc')
  assert.equal(s.spanId, m[2])
  assert.equal(attr(s, 'http.response.status_code'), '200')
  assert.equal(attr(s, 'network.protocol.version'), '2')
})
