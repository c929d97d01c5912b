// buffering in front of a gRPC service (protocol = "h2c", @grpc/grpc-js on
// both sides): the call's request is read whole and its answer held whole, the
// trailers (grpc-status) kept and sent after the body, so a unary call, a
// client stream and a call that fails reach the client as without it.
import { strict as assert } from 'node:assert'
import { after, before, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { type Lb, startLb } from '../helpers.js'
import { def, raw, serveGrpc, unary } from '../h2/grpc-service.js'

const SERVICE = {
  Echo: def('/t.T/Echo', false, false),
  Sum: def('/t.T/Sum', true, false),
  Fail: def('/t.T/Fail', false, false),
}

let server: grpc.Server
let lb: Lb
let client: grpc.Client

before(async () => {
  const s = await serveGrpc(SERVICE, {
    Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.concat([Buffer.from('echo:'), call.request])),
    Sum: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      let sum = 0
      call.on('data', (d: Buffer) => { sum += Number(d.toString()) })
      call.on('end', () => cb(null, Buffer.from(String(sum))))
    },
    Fail: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb({ code: grpc.status.NOT_FOUND, details: 'no such thing' }),
  })
  server = s.server
  lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.grpc]
address = "127.0.0.1:0"
protocol = "h2c"
[middlewares.buf]
type = "buffering"
max_response_body_bytes = 100000
[routers.grpc]
rule = "PathPrefix(\`/t.T/\`)"
service = "grpc"
middlewares = ["buf"]
[services.grpc]
protocol = "h2c"
[[services.grpc.servers]]
address = "127.0.0.1:${s.port}"
check = false
`)
  client = new grpc.Client(`127.0.0.1:${await lb.portOf('grpc')}`, grpc.credentials.createInsecure())
})

after(async () => {
  client?.close()
  server?.forceShutdown()
  await lb?.stop()
})

test('a unary call through buffering', async () => {
  assert.equal((await unary(client, '/t.T/Echo', 'hi')).toString(), 'echo:hi')
})

test('a client stream through buffering: read whole, then answered', async () => {
  const sum = await new Promise<string>((resolve, reject) => {
    const call = client.makeClientStreamRequest('/t.T/Sum', raw, raw, new grpc.Metadata(), {}, (err, v) => err !== null ? reject(err) : resolve(v!.toString()))
    for (const n of [1, 2, 3, 4]) call.write(Buffer.from(String(n)))
    call.end()
  })
  assert.equal(sum, '10')
})

test('a failing call keeps its grpc-status and message', async () => {
  await assert.rejects(unary(client, '/t.T/Fail', 'x'), (err: grpc.ServiceError) => err.code === grpc.status.NOT_FOUND && err.details === 'no such thing')
})
