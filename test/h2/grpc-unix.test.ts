// A gRPC server on a unix socket (address = "unix:/path") behind a service with
// protocol = "h2c": calls reach it and its gRPC health check passes. The
// HTTP/2 session used to be dialled at "http://unix:/path", which connects nowhere.
import { strict as assert } from 'node:assert'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { type Lb, firstChecksPassed, startLb, tempDir } from '../helpers.js'

const raw = (b: Buffer): Buffer => b
const def = (path: string): grpc.MethodDefinition<Buffer, Buffer> => ({
  path, requestStream: false, responseStream: false, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw,
})

let server: grpc.Server
let lb: Lb
let client: grpc.Client

before(async () => {
  const sock = join(tempDir('lb-grpc-unix-'), 'grpc.sock')
  server = new grpc.Server()
  server.addService({ Echo: def('/t.T/Echo'), Check: def('/grpc.health.v1.Health/Check') } as unknown as grpc.ServiceDefinition, {
    Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.concat([Buffer.from('unix:'), c.request])),
    Check: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from([0x08, 1])), // SERVING
  })
  await new Promise<number>((resolve, reject) => server.bindAsync(`unix:${sock}`, grpc.ServerCredentials.createInsecure(), (err, p) => err !== null ? reject(err) : resolve(p)))
  lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.grpc]
address = "127.0.0.1:0"
protocol = "h2c"
[routers.grpc]
rule = "PathPrefix(\`/t.T/\`)"
service = "grpc"
[services.grpc]
protocol = "h2c"
[services.grpc.health_check]
type = "grpc"
interval = "100ms"
[[services.grpc.servers]]
name = "u1"
address = "unix:${sock}"
`)
  client = new grpc.Client(`127.0.0.1:${await lb.portOf('grpc')}`, grpc.credentials.createInsecure())
})

after(async () => {
  client?.close()
  await lb?.stop()
  server?.forceShutdown()
})

test('an h2c server on a unix socket: its gRPC health check passes and calls reach it', async () => {
  await firstChecksPassed(lb, ['u1'])
  const v = await new Promise<string>((resolve, reject) => client.makeUnaryRequest('/t.T/Echo', raw, raw, Buffer.from('hi'), (err, r) => err !== null ? reject(err) : resolve(r!.toString())))
  assert.equal(v, 'unix:hi')
})
