// A gRPC server on a unix socket (address = "unix:/path") behind a service with
// protocol = "h2c": calls reach it and its gRPC health check passes. The
// HTTP/2 session used to be dialled at "http://unix:/path", which connects nowhere.
import { strict as assert } from 'node:assert'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { type Lb, firstChecksPassed, startLb, tempDir } from '../helpers.js'
import { HEALTH_CHECK, SERVING, def, serveGrpc, unary } from './grpc-service.js'

let server: grpc.Server
let lb: Lb
let client: grpc.Client

before(async () => {
  const sock = join(tempDir('lb-grpc-unix-'), 'grpc.sock')
  ;({ server } = await serveGrpc({ Echo: def('/t.T/Echo'), Check: HEALTH_CHECK }, {
    Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.concat([Buffer.from('unix:'), c.request])),
    Check: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, SERVING),
  }, `unix:${sock}`))
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
  assert.equal((await unary(client, '/t.T/Echo', 'hi')).toString(), 'unix:hi')
})
