// The request counters of /metrics carry Traefik's `protocol` label: a gRPC
// call (@grpc/grpc-js over h2c) counts as protocol="grpc" with the grpc-status
// its client got as `code` (the server's, or lb's own for a call lb refused),
// and an HTTP/1.1 request of the same lb as protocol="http" with its HTTP code.
import { strict as assert } from 'node:assert'
import { after, before, test } from 'node:test'
import grpc from '@grpc/grpc-js'
import { request } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { def, serveGrpc, unary } from './grpc-service.js'

let server: grpc.Server
let a: AdminLb
let client: grpc.Client

/** The grpc-status the client got: 0 for a reply. */
const call = (method: string): Promise<number> => unary(client, method, 'x').then(() => 0, (err: grpc.ServiceError) => err.code)

/** The value of the sample of `name` with every one of `labels` (in any order), or 0 when there is none. */
function sample (text: string, name: string, labels: Record<string, string>): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return 0
}

before(async () => {
  let port: number
  ;({ server, port } = await serveGrpc({ Ok: def('/t.T/Ok'), NotFound: def('/t.T/NotFound') }, {
    Ok: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from('ok')),
    NotFound: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb({ code: grpc.status.NOT_FOUND, details: 'no such thing' }),
  }))
  a = await startAdminLb(`
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
  client = new grpc.Client(`127.0.0.1:${await a.lb.portOf('grpc')}`, grpc.credentials.createInsecure())
})

after(async () => {
  client?.close()
  await a?.lb.stop()
  server?.forceShutdown()
})

test('request counters: protocol="grpc" with the grpc-status as code; protocol="http" for HTTP/1.1', async () => {
  for (let i = 0; i < 3; i++) assert.equal(await call('/t.T/Ok'), 0)
  for (let i = 0; i < 2; i++) assert.equal(await call('/t.T/NotFound'), grpc.status.NOT_FOUND)
  assert.equal(await call('/nowhere.N/Call'), grpc.status.UNIMPLEMENTED) // lb's own answer: no route
  assert.equal((await request(`${a.lb.url}/nowhere`)).status, 404)
  const m = (await request(`${a.dash}/metrics`)).body
  const router = { router: 'grpc@file', service: 'grpc@file', method: 'POST', protocol: 'grpc' }
  assert.equal(sample(m, 'lb_router_requests_total', { ...router, code: '0' }), 3)
  assert.equal(sample(m, 'lb_router_requests_total', { ...router, code: '5' }), 2)
  assert.equal(sample(m, 'lb_service_requests_total', { service: 'grpc@file', protocol: 'grpc', code: '0' }), 3)
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { entrypoint: 'grpc', protocol: 'grpc', code: '12' }), 1)
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { entrypoint: 'grpc', protocol: 'grpc', code: '0' }), 3)
  // not under their HTTP status (200) as well
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { entrypoint: 'grpc', code: '200' }), 0)
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { entrypoint: 'web', method: 'GET', protocol: 'http', code: '404' }), 1)
})
