// health_check.type = "grpc": lb calls grpc.health.v1.Health/Check on each
// server. Two @grpc/grpc-js servers implement Check by hand (the protobuf bytes
// are written here, not generated); one is turned NOT_SERVING, then made to
// answer an error status, then to answer nothing, then to answer
// DEADLINE_EXCEEDED (what grpc-js itself answers when lb's grpc-timeout runs out
// before lb's own timer fires), and each time lb marks it DOWN after `fall`
// checks (calls all go to the other) and UP after `rise`.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { type Lb, count, firstChecksPassed, startLb, waitFor } from '../helpers.js'
import { HEALTH_CHECK, NOT_SERVING, SERVING, def, serveGrpc, unary } from './grpc-service.js'

const SERVICE = { Check: HEALTH_CHECK, Who: def('/t.T/Who') }

/** HealthCheckRequest.service (field 1, length-delimited; these names are short: a one-byte length) */
function serviceOf (msg: Buffer): string {
  if (msg.length === 0) return ''
  assert.equal(msg[0], 0x0a)
  return msg.subarray(2, 2 + msg[1]!).toString()
}

type Mode = 'serving' | 'not-serving' | 'error' | 'silent' | 'deadline'
interface Backend { server: grpc.Server, port: number, mode: Mode, asked: string[] }

async function backend (name: string): Promise<Backend> {
  const b = { mode: 'serving' as Mode, asked: [] as string[] }
  const { server, port } = await serveGrpc(SERVICE, {
    Check: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      b.asked.push(serviceOf(call.request))
      // HealthCheckResponse.status is field 1, a varint: SERVING 1, NOT_SERVING 2
      if (b.mode === 'serving') cb(null, SERVING)
      else if (b.mode === 'not-serving') cb(null, NOT_SERVING)
      else if (b.mode === 'error') cb({ code: grpc.status.UNAVAILABLE, details: 'warming up' })
      else if (b.mode === 'deadline') cb({ code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline exceeded' })
      // silent: no answer; lb's check times out
    },
    Who: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from(name)),
  })
  return Object.assign(b, { server, port })
}

let a: Backend
let b: Backend
let lb: Lb
let client: grpc.Client

async function who (): Promise<string> {
  return (await unary(client, '/t.T/Who', '')).toString()
}

async function whoMany (n: number): Promise<Record<string, number>> {
  const out: string[] = []
  for (let i = 0; i < n; i++) out.push(await who())
  return count(out)
}

/** Waits for the n-th log line with `msg` about server a. */
async function nth (msg: string, n: number): Promise<string> {
  const re = new RegExp(`"msg":"${msg}"[^\\n]*"server":"a"[^\\n]*`, 'g')
  return waitFor(() => { const m = lb.log().match(re); return m !== null && m.length >= n ? m[n - 1] : null }, `${n} "${msg}" lines for a`, 10_000)
}

before(async () => {
  a = await backend('a')
  b = await backend('b')
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
grpc_service = "t.T"
interval = "100ms"
timeout = "300ms"
rise = 2
fall = 2
[[services.grpc.servers]]
name = "a"
address = "127.0.0.1:${a.port}"
[[services.grpc.servers]]
name = "b"
address = "127.0.0.1:${b.port}"
`)
  client = new grpc.Client(`127.0.0.1:${await lb.portOf('grpc')}`, grpc.credentials.createInsecure())
  await firstChecksPassed(lb, ['a', 'b'])
})

after(async () => {
  client?.close()
  await lb?.stop()
  a?.server.forceShutdown()
  b?.server.forceShutdown()
})

describe('gRPC health checks', () => {
  test('the check asks for the configured grpc_service; both SERVING servers take calls', async () => {
    assert.ok(a.asked.length > 0 && a.asked.every((s) => s === 't.T'), a.asked.join(','))
    assert.deepEqual(await whoMany(10), { a: 5, b: 5 })
  })

  for (const [mode, reason, round] of [
    ['not-serving', /Health\/Check\(\\"t.T\\"\) → NOT_SERVING \(expected SERVING\), 2 of 2 checks failed/, 1],
    ['error', /Health\/Check\(\\"t.T\\"\) → grpc-status 14 \(expected SERVING\)/, 2],
    ['silent', /Health\/Check\(\\"t.T\\"\): no answer within 300ms/, 3],
    ['deadline', /Health\/Check\(\\"t.T\\"\): no answer within 300ms/, 4],
  ] as const) {
    test(`a server whose check is ${mode} goes DOWN after fall checks and takes no calls; SERVING again, it comes back after rise`, async () => {
      a.mode = mode
      const down = await nth('server DOWN', round)
      assert.match(down, reason)
      assert.deepEqual(await whoMany(10), { b: 10 })
      a.mode = 'serving'
      await nth('server UP', round)
      assert.deepEqual(await whoMany(10), { a: 5, b: 5 })
    })
  }
})
