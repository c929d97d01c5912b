// Active checks (control plane) and passive marking (workers), seen by all workers.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import net from 'node:net'
import { test } from 'node:test'
import { count, freePort, getMany, request, simpleConfig, startBackend, startLb, waitFor } from '../helpers.js'

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
  // the verdict is in shared memory before the line is logged: every worker sees it from then on
  await lb.logMatching(/"msg":"server DOWN".*"server":"s1"/)
  assert.deepEqual(count(await getMany(lb.url, 20)), { steady: 20 })
  healthy = true
  await lb.logMatching(/"msg":"server UP".*"server":"s1"/)
  assert.deepEqual(count(await getMany(lb.url, 20)), { flaky: 10, steady: 10 })
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
  await lb.logMatching(/server out of rotation/)
  assert.match(lb.log(), new RegExp(`"msg":"server out of rotation \\(passive health\\)"[^\\n]*"reason":"s1 ${bad}: 3 failed requests within 1\\.5s \\(max_fails\\); back in 1\\.5s"`))
  // back in rotation after fail_timeout: it gets traffic (and fails) again
  await waitFor(async () => { await getMany(lb.url, 2); return resets > 3 }, 's1 back in rotation after its fail_timeout (1.5 s): a request reaching it', 5000, 100)
})

test('no server up: the 503 and the log say which check failed and how; every state change is logged with its reason', async (t) => {
  // like `python3 -m http.server` (the README's old suggestion): 404 on /health, until told otherwise
  let healthStatus = 404
  const web1 = await startBackend('web1', (req, res) => {
    req.resume()
    res.statusCode = req.url === '/health' ? healthStatus : 200
    res.end('web1\n')
  })
  const nothing = await freePort() // web2: nothing listens there
  const conf = simpleConfig([web1.address, `127.0.0.1:${nothing}`], `[services.web.health_check]
interval = "100ms"
timeout = "500ms"
rise = 2
fall = 3`).replaceAll('check = false', 'check = true')
  const lb = await startLb(conf)
  t.after(async () => { await lb.stop(); await web1.close() })
  const downLine = (server: string): RegExp => new RegExp(`"msg":"server DOWN".*"server":"${server}".*`)
  await lb.logMatching(downLine('s2'), 10_000)
  const log = await lb.logMatching(downLine('s1'), 10_000)
  const reason = (line: RegExp): string => (JSON.parse(line.exec(log)![0]) as { reason: string }).reason
  assert.equal(reason(/\{[^\n]*"msg":"server DOWN"[^\n]*"server":"s1"[^\n]*\}/), `s1 ${web1.address}: GET /health → 404 (expected 200), 3 of 3 checks failed`)
  assert.equal(reason(/\{[^\n]*"msg":"server DOWN"[^\n]*"server":"s2"[^\n]*\}/), `s2 127.0.0.1:${nothing}: GET /health: connection refused, 3 of 3 checks failed`)

  const r = await request(lb.url)
  assert.equal(r.status, 503)
  assert.match(r.body, new RegExp(`^no server available for service web: s1 ${web1.address}: DOWN, GET /health → 404 \\(expected 200\\), \\d+( of 3)? checks failed( in a row)?; ` +
    `s2 127\\.0\\.0\\.1:${nothing}: DOWN, GET /health: connection refused, \\d+( of 3)? checks failed( in a row)?\\n$`))

  // the check's outcome changes while the server stays DOWN, then it comes UP: each step logged with its reason
  healthStatus = 200
  const up = await lb.logMatching(/"msg":"server UP"[^\n]*"server":"s1"/, 10_000)
  assert.match(up, new RegExp(`"msg":"health check passed, server still DOWN"[^\\n]*"reason":"s1 ${web1.address}: GET /health → 200, 1 of 2 checks passed"`))
  assert.match(up, new RegExp(`"msg":"server UP"[^\\n]*"reason":"s1 ${web1.address}: GET /health → 200, 2 of 2 checks passed"`))
  assert.equal((await request(lb.url)).body, 'web1\n')
  // no line per check: outcome changes only (start-up, DOWN, the 200, UP)
  assert.ok(lb.log().split('\n').filter((l) => l.includes('"server":"s1"')).length <= 5, lb.log())
})
