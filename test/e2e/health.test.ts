// Active checks (control plane) and passive marking (workers), seen by all workers.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import net from 'node:net'
import { test } from 'node:test'
import { count, getMany, simpleConfig, sleep, startBackend, startLb } from '../helpers.js'

test('active checks take a failing server out and bring it back when it recovers', async (t) => {
  let healthy = true
  const flaky = await startBackend('flaky', (req, res) => {
    req.resume()
    if (req.url === '/health') { res.statusCode = healthy ? 200 : 500; res.end(); return }
    res.end('flaky\n')
  })
  const steady = await startBackend('steady')
  const conf = simpleConfig([flaky.address, steady.address], `[services.web.health_check]
interval = "100ms"
timeout = "200ms"
rise = 2
fall = 2`).replaceAll('check = false', 'check = true')
  const lb = await startLb(conf)
  t.after(async () => { await lb.stop(); await flaky.close(); await steady.close() })
  assert.deepEqual(count(await getMany(lb.url, 20)), { flaky: 10, steady: 10 })
  healthy = false
  await sleep(600)
  assert.deepEqual(count(await getMany(lb.url, 20)), { steady: 20 })
  assert.match(lb.log(), /"msg":"server DOWN".*"server":"s1"/)
  healthy = true
  await sleep(600)
  assert.deepEqual(count(await getMany(lb.url, 20)), { flaky: 10, steady: 10 })
  assert.match(lb.log(), /"msg":"server UP"/)
  // health probes carry the configured path and are not proxied traffic
  assert.ok(flaky.requests.some((r) => r.url === '/health' && r.headers['user-agent'] === 'lb-health-check'))
})

test('passive: max_fails failures within fail_timeout take a server out for fail_timeout, in every worker', async (t) => {
  const resetter = net.createServer((s) => s.on('data', () => s.resetAndDestroy()))
  await new Promise<void>((r) => resetter.listen(0, '127.0.0.1', r))
  const good = await startBackend('good')
  const bad = `127.0.0.1:${(resetter.address() as net.AddressInfo).port}`
  let resets = 0
  resetter.on('connection', () => { resets++ })
  const lb = await startLb(simpleConfig([bad, good.address]).replace('check = false', 'check = false\nmax_fails = 3\nfail_timeout = "1500ms"'))
  t.after(async () => { await lb.stop(); await good.close(); resetter.close() })
  // POSTs are not retried, so each one that reaches the bad server fails: 3 of them mark it down
  const statuses: number[] = []
  for (let i = 0; i < 20; i++) {
    statuses.push(await new Promise<number>((res) => {
      const req = http.request(lb.url, { method: 'POST', agent: false }, (r) => { r.resume(); res(r.statusCode!) })
      req.end('x')
    }))
  }
  assert.equal(statuses.filter((s) => s === 502).length, 3, statuses.join(','))
  assert.equal(resets, 3)
  await sleep(1700)
  // back in rotation after fail_timeout: it gets traffic (and fails) again
  await getMany(lb.url, 4)
  assert.ok(resets > 3)
})
