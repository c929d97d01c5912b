// circuitBreaker (Traefik's): its expression language, and through the real
// balancer (one worker: the breaker's state is per worker, as Traefik's per
// instance) in front of a backend the test turns bad and good again: the
// breaker trips when the expression holds, answers 503 itself while open (the
// backend sees nothing), and lets requests through again after
// fallback_duration; network errors (a server that refuses connections) trip
// NetworkErrorRatio(). The dashboard API shows an open breaker as a warning.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, freePort, request, sleep, startBackend, waitFor } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { oneMiddleware, problems } from './setup.js'
import { type Measures, parseExpression } from '../../plugins/circuit-expression.js'

const m = (net: number, codes: number, latency: number): Measures => ({
  networkErrorRatio: () => net,
  responseCodeRatio: () => codes,
  latencyAtQuantileMs: () => latency,
})

describe('circuitBreaker: the expression', () => {
  test('Traefik\'s functions, comparisons, && || and parentheses', () => {
    const p = parseExpression('NetworkErrorRatio() > 0.30 || (ResponseCodeRatio(500, 600, 0, 600) > 0.25 && LatencyAtQuantileMS(50.0) > 100)')
    assert.equal(typeof p, 'function')
    const f = p as (x: Measures) => boolean
    assert.equal(f(m(0.5, 0, 0)), true)
    assert.equal(f(m(0.1, 0.5, 50)), false)
    assert.equal(f(m(0.1, 0.5, 150)), true)
    assert.equal((parseExpression('LatencyAtQuantileMS(99) <= 10') as (x: Measures) => boolean)(m(0, 0, 10)), true)
  })
  test('what is not an expression says why', () => {
    assert.match(parseExpression('Foo() > 1') as string, /unknown function "Foo"/)
    assert.match(parseExpression('NetworkErrorRatio()') as string, /expected a comparison/)
    assert.match(parseExpression('ResponseCodeRatio(500, 600) > 0.1') as string, /takes 4 arguments/)
    assert.match(parseExpression('NetworkErrorRatio() > 0.5 &&') as string, /unknown function|expected/)
    assert.match(problems(oneMiddleware('type = "circuitBreaker"\nexpression = "Nope() > 1"')), /middlewares\.m\.expression: expected an expression as Traefik's/)
    assert.match(problems(oneMiddleware('type = "circuitBreaker"')), /middlewares\.m\.expression: expected a string \(required\)/)
  })
})

describe('circuitBreaker through the balancer', () => {
  let backend: Backend, a: AdminLb
  let failing = false
  const get = async (path: string): Promise<{ status: number, body: string }> => request(a.lb.url + path)

  before(async () => {
    backend = await startBackend('web', (req, res) => { req.resume(); req.on('end', () => { res.statusCode = failing ? 500 : 200; res.end(failing ? 'bad\n' : 'ok\n') }) })
    const dead = await freePort()
    a = await startAdminLb(`[global]
workers = 1
access_log = "off"

[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[middlewares.cb]
type = "circuitBreaker"
expression = "ResponseCodeRatio(500, 600, 0, 600) > 0.5"
check_period = "20ms"
fallback_duration = "600ms"
recovery_duration = "0s"
[middlewares.net]
type = "circuitBreaker"
expression = "NetworkErrorRatio() > 0.5"
check_period = "20ms"
fallback_duration = "60s"
[routers.app]
rule = "PathPrefix(\`/app\`)"
service = "web"
middlewares = ["cb"]
[routers.down]
rule = "PathPrefix(\`/down\`)"
service = "dead"
middlewares = ["net"]
[services.web]
[[services.web.servers]]
address = "${backend.address}"
check = false
[services.dead]
retries = 0
[[services.dead.servers]]
address = "127.0.0.1:${dead}"
check = false
max_fails = 0
`)
  })
  after(async () => { await a.lb.stop(); await backend.close() })

  test('healthy: requests pass; failing: it trips and answers 503 itself, the backend sees nothing; after fallback_duration it passes again', async () => {
    assert.equal((await get('/app')).status, 200)
    failing = true
    const open = await waitFor(async () => {
      const r = await get('/app')
      await sleep(5)
      return r.status === 503 ? r : null
    }, 'the breaker to trip', 5000, 0)
    assert.match(open.body, /circuit breaker cb is open/)
    const seen = backend.requests.length
    for (let i = 0; i < 10; i++) assert.equal((await get('/app')).status, 503)
    assert.equal(backend.requests.length, seen, 'nothing reached the backend while open')
    const mw = JSON.parse((await request(`${a.dash}/api/http/middlewares/cb@file`)).body) as { status: string }
    assert.equal(mw.status, 'warning')
    failing = false
    await waitFor(async () => (await get('/app')).status === 200 || null, 'the breaker to close', 5000, 50)
  })

  test('NetworkErrorRatio(): a server that refuses connections trips it (502s, then lb\'s 503)', async () => {
    const first = await get('/down')
    assert.equal(first.status, 502)
    const r = await waitFor(async () => {
      const x = await get('/down')
      await sleep(5)
      return x.status === 503 ? x : null
    }, 'the breaker to trip', 5000, 0)
    assert.match(r.body, /circuit breaker net is open/)
  })
})
