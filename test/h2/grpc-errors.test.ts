// Errors lb makes itself reach a gRPC client (@grpc/grpc-js over h2c) as gRPC
// statuses, not HTML: 14 UNAVAILABLE when no server is up, 16 UNAUTHENTICATED
// from basicAuth, 8 RESOURCE_EXHAUSTED from a rate limit, 12 UNIMPLEMENTED with
// no route. No proto is needed: the calls carry raw bytes.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { type Lb, freePort, request, startLb } from '../helpers.js'
import { unary } from './grpc-service.js'

/** The error of a call expected to fail. */
const call = (client: grpc.Client, method: string): Promise<grpc.ServiceError> =>
  unary(client, method, 'hi').then((v) => { throw new Error(`expected an error, got ${v.toString()}`) }, (err: grpc.ServiceError) => err)

let lb: Lb
let client: grpc.Client

before(async () => {
  const dead = await freePort() // nothing listens there
  lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.grpc]
address = "127.0.0.1:0"
protocol = "h2c"
[middlewares.auth]
type = "basicAuth"
users = ["ann:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw="]
[middlewares.slow]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 1
period = "60s"
[routers.auth]
rule = "PathPrefix(\`/auth.\`)"
middlewares = ["auth"]
service = "dead"
[routers.limited]
rule = "PathPrefix(\`/limited.\`)"
middlewares = ["slow"]
service = "dead"
[routers.dead]
rule = "PathPrefix(\`/dead.\`)"
service = "dead"
[services.dead]
retries = 0
[[services.dead.servers]]
address = "127.0.0.1:${dead}"
check = false
`)
  client = new grpc.Client(`127.0.0.1:${await lb.portOf('grpc')}`, grpc.credentials.createInsecure())
})

after(async () => {
  client?.close()
  await lb?.stop()
})

describe('errors lb makes for a gRPC client are gRPC statuses', () => {
  test('no server reachable: 14 UNAVAILABLE with lb\'s reason as the message', async () => {
    const err = await call(client, '/dead.Svc/Call')
    assert.equal(err.code, grpc.status.UNAVAILABLE)
    assert.match(err.details, /upstream/) // lb's message (ERRORS.md), first line
  })

  test('basicAuth without credentials: 16 UNAUTHENTICATED', async () => {
    const err = await call(client, '/auth.Svc/Call')
    assert.equal(err.code, grpc.status.UNAUTHENTICATED)
    assert.doesNotMatch(err.details, /HTTP status code/) // grpc-js's words for an HTTP error answer
  })

  test('over a rate limit: 8 RESOURCE_EXHAUSTED', async () => {
    await call(client, '/limited.Svc/Call') // the one allowed (then 14: no server)
    assert.equal((await call(client, '/limited.Svc/Call')).code, grpc.status.RESOURCE_EXHAUSTED)
  })

  test('no route: 12 UNIMPLEMENTED; an HTTP/1.1 client of the same lb still gets its 404 text', async () => {
    const err = await call(client, '/nowhere.Svc/Call')
    assert.equal(err.code, grpc.status.UNIMPLEMENTED)
    assert.doesNotMatch(err.details, /HTTP status code/)
    const r = await request(`${lb.url}/nowhere`)
    assert.equal(r.status, 404)
  })
})
