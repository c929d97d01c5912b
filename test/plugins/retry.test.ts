// retry (Traefik's): through the real balancer, a router's retry middleware sets
// how many tries a request gets on its service (the first included) and the
// wait before each retry (doubling), over the service's own `retries`. A
// service of one server that refuses connections and one that answers, with
// `retries = 0`: without the middleware some requests fail, with attempts = 2
// none does. With only refusing servers, attempts = 3 and 100 ms: three tries,
// the last after at least 100 + 200 ms, then 502.
import { strict as assert } from 'node:assert'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Backend, freePort, request, startBackend, waitFor } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { oneMiddleware, problems } from './setup.js'

describe('retry: config validation', () => {
  test('attempts is required, 1 to 11; initial_interval a duration up to 60 s', () => {
    assert.match(problems(oneMiddleware('type = "retry"')), /middlewares\.m\.attempts: expected an integer from 1 to 11 \(required\)/)
    assert.match(problems(oneMiddleware('type = "retry"\nattempts = 0')), /middlewares\.m\.attempts: expected an integer from 1 to 11/)
    assert.match(problems(oneMiddleware('type = "retry"\nattempts = 2\ninitial_interval = "2m"')), /middlewares\.m\.initial_interval: expected a duration/)
  })
})

describe('retry through the balancer', () => {
  let live: Backend, a: AdminLb
  before(async () => {
    live = await startBackend('live')
    const [dead1, dead2] = [await freePort(), await freePort()]
    const server = (name: string, address: string): string => `[[services.${name}]]\naddress = "${address}"\ncheck = false\nmax_fails = 0\n`
    a = await startAdminLb(`[global]
workers = 2
access_log = "{{DIR}}/access.log"

[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[middlewares.twice]
type = "retry"
attempts = 2
[middlewares.patient]
type = "retry"
attempts = 3
initial_interval = "100ms"
[routers.plain]
rule = "PathPrefix(\`/plain\`)"
service = "half"
[routers.retried]
rule = "PathPrefix(\`/retried\`)"
service = "half"
middlewares = ["twice"]
[routers.patient]
rule = "PathPrefix(\`/patient\`)"
service = "none"
middlewares = ["patient"]
[services.half]
retries = 0
${server('half.servers', `127.0.0.1:${dead1}`)}${server('half.servers', live.address)}
[services.none]
retries = 0
${server('none.servers', `127.0.0.1:${dead1}`)}${server('none.servers', `127.0.0.1:${dead2}`)}
`)
  })
  after(async () => { await a.lb.stop(); await live.close() })

  test('the service\'s retries = 0: requests that meet the refusing server fail', async () => {
    const rs = await Promise.all(Array.from({ length: 20 }, () => request(`${a.lb.url}/plain`)))
    assert.ok(rs.some((r) => r.status === 502), 'some 502')
    assert.ok(rs.some((r) => r.status === 200), 'some 200')
  })

  test('attempts = 2 on the same service: every request reaches the answering server', async () => {
    const rs = await Promise.all(Array.from({ length: 20 }, () => request(`${a.lb.url}/retried`)))
    assert.deepEqual([...new Set(rs.map((r) => r.status))], [200])
  })

  test('attempts = 3 with 100 ms: three tries, waits of 100 then 200 ms, then the error', async () => {
    const t0 = Date.now()
    const r = await request(`${a.lb.url}/patient`)
    const ms = Date.now() - t0
    assert.equal(r.status, 502)
    assert.ok(ms >= 300, `answered after ${ms} ms, before the two waits were over`)
    // the access log counts the retries (written in the background: wait for the line)
    const line = await waitFor(() => readFileSync(join(a.lb.dir, 'access.log'), 'utf8').split('\n').find((l) => l.includes('/patient')), 'the access log line')
    assert.match(line, /"retries":2\b/)
  })
})
