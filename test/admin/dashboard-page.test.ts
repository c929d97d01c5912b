// The /dashboard/ page in headless Chromium (Debian package "chromium"),
// driven over the DevTools protocol, opened after traffic has run for a few
// seconds: its charts start with the control plane's history (what led to
// now), each server shows its own state (maintenance and drain apart from a
// failed check or passive marking) with weight, rate, share, errors, in
// flight, last check and why it is out; 4xx and 5xx rates, connections, entry
// points and middlewares are shown, the latency chart has a legend.
// LB_DASHBOARD_SCREENSHOT=file.png saves what it shows.
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { test } from 'node:test'
import { connect, startChromium, stopChromium } from '../chromium.js'
import { request, sleep, startBackend } from '../helpers.js'
import { backends, requireTool, sock, startAdminLb } from './util.js'

test('dashboard page: history, per-server detail and admin states in headless Chromium', { timeout: 90_000 }, async (t) => {
  const bin = requireTool(t, 'chromium', 'chromium')
  if (bin === null) return
  const b1 = await startBackend('b1', (req, res) => { req.resume(); res.statusCode = req.url === '/nf' ? 404 : 200; res.end('b1\n') })
  const [b2, b3] = await backends(2)
  const config = `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
middlewares = ["limit"]
[routers.broken]
rule = "PathPrefix(\`/broken\`)"
service = "broken"
[middlewares.limit]
type = "rateLimit"
average = 1000
burst = 1000
[services.web]
[[services.web.servers]]
name = "w1"
address = "${b1.address}"
[[services.web.servers]]
name = "w2"
address = "${b2!.address}"
[[services.web.servers]]
name = "w3"
address = "${b3!.address}"
weight = 2
[[services.web.servers]]
name = "gone"
address = "127.0.0.1:1"
[services.web.health_check]
path = "/"
interval = "100ms"
fall = 1
[services.broken]
[[services.broken.servers]]
name = "x"
address = "127.0.0.1:1"
check = false
`
  const a = await startAdminLb(config)
  t.after(async () => {
    await a.lb.stop()
    for (const b of [b1, b2!, b3!]) await b.close()
  })
  // w2 in maintenance, w3 draining: both out of rotation by an operator, not by a failure
  assert.equal(await sock(a.sock, 'set server web/w2 state maint;set server web/w3 state drain'), '\n\n')
  let traffic = true
  const load = (async () => {
    for (let i = 0; traffic; i++) {
      await request(`${a.lb.url}${i % 5 === 0 ? '/broken' : i % 7 === 0 ? '/nf' : '/'}`).catch(() => undefined)
      await sleep(10)
    }
  })()
  t.after(async () => { traffic = false; await load })
  // the page is opened only after six seconds of traffic: what it shows first comes from the control plane's history
  await sleep(6_000)
  const chrome = await startChromium(bin)
  t.after(() => stopChromium(chrome))
  const cdp = await connect(chrome.port, `${a.dash}/dashboard/`)
  t.after(() => cdp.close())
  interface Seen {
    points: number, rate: string, rateMax: string, errors: string, latency: string, conns: string, errorMax: string, legend: string, error: string,
    servers: Array<Record<string, string>>, entrypoints: string[], routers: Array<[string, string]>, middlewares: string[]
  }
  const read = async (): Promise<Seen | null> => {
    const r = await cdp.call('Runtime.evaluate', {
      returnByValue: true,
      expression: `JSON.stringify({
        points: Number(document.getElementById('rate-chart').dataset.points || 0),
        rate: document.getElementById('rate').textContent,
        errors: document.getElementById('errors').textContent,
        latency: document.getElementById('latency').textContent,
        conns: document.getElementById('conns').textContent,
        errorMax: document.getElementById('error-chart').dataset.max || '',
        rateMax: document.getElementById('rate-chart').dataset.max || '',
        legend: document.getElementById('latency-legend').textContent,
        error: document.getElementById('error').textContent,
        servers: [...document.querySelectorAll('#servers tr.server')].map((tr) => ({ ...tr.dataset })),
        entrypoints: [...document.querySelectorAll('#entrypoints tbody tr')].map((tr) => tr.dataset.name),
        routers: [...document.querySelectorAll('#routers tbody tr')].map((tr) => [tr.dataset.name, tr.children[3].textContent]),
        middlewares: [...document.querySelectorAll('#middlewares tbody tr')].map((tr) => tr.dataset.name),
      })`,
    })
    const value = (r.result as { value?: string } | undefined)?.value
    return value === undefined ? null : JSON.parse(value) as Seen // undefined while the page is still loading
  }
  let seen = await read()
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline && (seen === null || seen.points === 0 || seen.servers.length < 5)) {
    await sleep(200)
    seen = await read()
  }
  assert.ok(seen !== null, 'the page loaded')
  assert.equal(seen.error, '', 'the page reports no fetch error')
  assert.ok(seen.points >= 5, `the first drawing already holds the history before the page was opened: ${seen.points} points`)
  const byName = Object.fromEntries(seen.servers.map((s) => [`${s.service}/${s.server}`, s]))
  assert.deepEqual(Object.fromEntries(Object.entries(byName).map(([k, s]) => [k, s.state])),
    { 'web/w1': 'UP', 'web/w2': 'MAINT', 'web/w3': 'DRAIN', 'web/gone': 'DOWN', 'broken/x': 'DOWN' }, 'admin states apart from failures')
  assert.match(byName['web/w2']!.reason!, /^maintenance/)
  assert.match(byName['web/w3']!.reason!, /^draining/)
  assert.match(byName['web/gone']!.reason!, /^health check failed: L4CON/)
  assert.match(byName['broken/x']!.reason!, /^passive: 3 failures within 30s/)
  assert.equal(byName['web/w1']!.reason, '')
  // req/s is the last second's (it may dip while Chromium starts on a loaded machine); the total is not
  assert.match(byName['web/w1']!.rate!, /^\d+$/)
  assert.ok(Number(byName['web/w1']!.requests) > 50, `w1 requests ${byName['web/w1']!.requests}`)
  assert.equal(byName['web/w1']!.share, '100', 'w1 takes every request of web')
  assert.equal(byName['web/w3']!.weight, '2')
  assert.match(byName['web/w1']!.check!, /^L7OK 200 in \d+ ms$/)
  assert.equal(byName['broken/x']!.check, 'not checked')
  assert.ok(Number(byName['broken/x']!.errors) >= 3, `errors of x: ${byName['broken/x']!.errors}`)
  // one client sends one request at a time while the page is read: at most one in flight
  assert.match(byName['web/w1']!.inflight!, /^[01]$/)
  const [max4xx, max5xx] = seen.errorMax.split(',').map(Number)
  assert.ok(max4xx! > 0 && max5xx! > 0, `4xx and 5xx rates charted: ${seen.errorMax}`)
  assert.ok(Number(seen.rateMax) > 5, `request rate charted: ${seen.rateMax}`)
  assert.match(seen.rate, /^\d+(\.\d+)?$/)
  assert.match(seen.errors, /^\d+(\.\d+)? \/ \d+(\.\d+)?$/)
  assert.match(seen.latency, /^\d+(\.\d+)? \/ \d+(\.\d+)?$/)
  assert.match(seen.conns, /^\d+ \/ \d+$/)
  assert.match(seen.legend, /mean.*p95/, 'the latency chart has a legend')
  assert.deepEqual(seen.entrypoints, ['web'])
  assert.deepEqual(seen.routers, [['broken@file', '—'], ['web@file', 'limit']], 'middlewares column')
  assert.deepEqual(seen.middlewares, ['limit@file'])

  const shot = process.env.LB_DASHBOARD_SCREENSHOT
  if (shot !== undefined && shot !== '') {
    await cdp.call('Emulation.setDeviceMetricsOverride', { width: 1280, height: 1500, deviceScaleFactor: 1, mobile: false })
    const png = await cdp.call('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true })
    writeFileSync(shot, Buffer.from(png.data as string, 'base64'))
  }
})
