// gRPC through lb: a client (@grpc/grpc-js) on an h2c entry point, a service
// with protocol = "h2c" in front of a grpc-js server on loopback. Calls carry
// raw bytes (no proto needed): unary, server streaming, client streaming,
// bidirectional, a deadline, cancellation seen by the server, a server killed
// mid-stream.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { type Lb, startLb, waitFor } from '../helpers.js'
import { def, raw, serveGrpc, unary as unaryCall } from './grpc-service.js'

const SERVICE = {
  Echo: def('/t.T/Echo', false, false),
  Count: def('/t.T/Count', false, true),
  Sum: def('/t.T/Sum', true, false),
  Chat: def('/t.T/Chat', true, true),
  Slow: def('/t.T/Slow', false, false),
}

let server: grpc.Server
let lb: Lb
let client: grpc.Client
let cancelled = 0

async function startServer (): Promise<number> {
  const s = await serveGrpc(SERVICE, {
    Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.concat([Buffer.from('echo:'), call.request])),
    Count: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      const n = Number(call.request.toString())
      let i = 0
      // stops when the call is cancelled (the server shut down mid-stream): the loop would keep the test process alive
      const next = (): void => { if (call.cancelled) return; if (i < n) { call.write(Buffer.from(String(i++))); setImmediate(next) } else call.end() }
      next()
    },
    Sum: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      let sum = 0
      call.on('data', (d: Buffer) => { sum += Number(d.toString()) })
      call.on('end', () => cb(null, Buffer.from(String(sum))))
    },
    Chat: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      call.on('data', (d: Buffer) => call.write(Buffer.concat([Buffer.from('re:'), d])))
      call.on('end', () => call.end())
    },
    Slow: (call: grpc.ServerUnaryCall<Buffer, Buffer>) => { call.on('cancelled', () => { cancelled++ }) },
  })
  server = s.server
  return s.port
}

const unary = (method: string, body: string, opts: grpc.CallOptions = {}): Promise<Buffer> => unaryCall(client, method, body, opts)

before(async () => {
  const port = await startServer()
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
[[services.grpc.servers]]
address = "127.0.0.1:${port}"
check = false
`)
  client = new grpc.Client(`127.0.0.1:${await lb.portOf('grpc')}`, grpc.credentials.createInsecure())
})

after(async () => {
  client?.close()
  server?.forceShutdown()
  await lb?.stop()
})

describe('gRPC through lb (h2c to h2c)', () => {
  test('unary', async () => {
    assert.equal((await unary('/t.T/Echo', 'hi')).toString(), 'echo:hi')
  })

  test('server streaming: 500 messages in order, then OK', async () => {
    const got: string[] = []
    await new Promise<void>((resolve, reject) => {
      const call = client.makeServerStreamRequest('/t.T/Count', raw, raw, Buffer.from('500'))
      call.on('data', (d: Buffer) => got.push(d.toString()))
      call.on('status', (s: grpc.StatusObject) => s.code === 0 ? resolve() : reject(new Error(s.details)))
      call.on('error', reject)
    })
    assert.deepEqual(got, Array.from({ length: 500 }, (_, i) => String(i)))
  })

  test('client streaming', async () => {
    const sum = await new Promise<string>((resolve, reject) => {
      const call = client.makeClientStreamRequest('/t.T/Sum', raw, raw, (err, v) => err !== null ? reject(err) : resolve(v!.toString()))
      for (let i = 1; i <= 100; i++) call.write(Buffer.from(String(i)))
      call.end()
    })
    assert.equal(sum, '5050')
  })

  test('bidirectional: each message answered while the call is open', async () => {
    const call = client.makeBidiStreamRequest('/t.T/Chat', raw, raw)
    const got: string[] = []
    for (const m of ['a', 'b', 'c']) {
      call.write(Buffer.from(m))
      await new Promise((resolve) => call.once('data', (d: Buffer) => { got.push(d.toString()); resolve(null) }))
    }
    call.end()
    await new Promise((resolve) => call.on('status', resolve))
    assert.deepEqual(got, ['re:a', 're:b', 're:c'])
  })

  test('a deadline: 4 DEADLINE_EXCEEDED, and the server sees the call cancelled', async () => {
    const before = cancelled
    await assert.rejects(unary('/t.T/Slow', 'x', { deadline: Date.now() + 300 }), (err: grpc.ServiceError) => err.code === grpc.status.DEADLINE_EXCEEDED)
    await waitFor(() => cancelled > before, 'the server to see the cancellation', 3000)
  })

  test('a client that cancels: the server sees it', async () => {
    const before = cancelled
    const call = client.makeUnaryRequest('/t.T/Slow', raw, raw, Buffer.from('x'), () => {})
    setTimeout(() => call.cancel(), 200)
    await waitFor(() => cancelled > before, 'the server to see the cancellation', 3000)
  })

  test('the server killed mid-stream: the call fails (not a clean end), lb serves on', async () => {
    const status = await new Promise<grpc.StatusObject>((resolve) => {
      const call = client.makeServerStreamRequest('/t.T/Count', raw, raw, Buffer.from('100000000'))
      let n = 0
      call.on('data', () => { if (++n === 10) server.forceShutdown() })
      call.on('error', () => {})
      call.on('status', resolve)
    })
    assert.notEqual(status.code, grpc.status.OK)
    await assert.rejects(unary('/t.T/Echo', 'x'), (err: grpc.ServiceError) => err.code === grpc.status.UNAVAILABLE)
  })
})
