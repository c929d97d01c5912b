// /metrics: counters move with traffic handled by every worker (one scrape sums
// all stripes), histograms agree with counters, server families follow
// runtime changes, reloads are counted, and the output passes
// `promtool check metrics` (Debian package "prometheus").
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { test } from 'node:test'
import { type Handler, reloadApplied, request, startBackend, waitFor } from '../helpers.js'
import { backends, requireTool, sock, startAdminLb } from './util.js'
import { closed, connect, nextMessage, startWsEcho } from '../ws/echo.js'

/** Router `app` (/app) to service `web`: s1 unchecked, s2 health-checked. */
function appConfig (s1: string, s2: string): string {
  return `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.app]
rule = "PathPrefix(\`/app\`)"
service = "web"
[services.web]
[[services.web.servers]]
name = "s1"
address = "${s1}"
check = false
[[services.web.servers]]
name = "s2"
address = "${s2}"
`
}

function sample (text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) total += Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return total
}

test('metrics: traffic across workers, server state, reloads, promtool', async (t) => {
  const promtool = requireTool(t, 'promtool', 'prometheus')
  const [b1, b2] = await backends(2)
  const a = await startAdminLb(appConfig(b1!.address, b2!.address), { workers: 2 })
  t.after(async () => { await a.lb.stop(); await b1!.close(); await b2!.close() })
  const scrape = async (): Promise<string> => {
    const r = await request(`${a.dash}/metrics`)
    assert.equal(r.status, 200)
    assert.equal(r.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8')
    return r.body
  }
  const before = await scrape()
  assert.equal(sample(before, 'lb_entrypoint_requests_total'), 0)

  // fresh connections each time: SO_REUSEPORT spreads them over both workers
  const N = 60
  await Promise.all(Array.from({ length: N }, (_, i) => request(`${a.lb.url}/app/${i}`)))
  await Promise.all(Array.from({ length: 10 }, () => request(`${a.lb.url}/app/x`, { method: 'POST', body: 'hello' })))
  await Promise.all(Array.from({ length: 5 }, () => request(`${a.lb.url}/nowhere`)))
  const m = await scrape()
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { entrypoint: 'web' }), N + 15)
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { method: 'GET', code: '200' }), N)
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { method: 'POST', code: '200' }), 10)
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { code: '404' }), 5)
  assert.equal(sample(m, 'lb_router_requests_total', { router: 'app@file', service: 'web@file' }), N + 10)
  assert.equal(sample(m, 'lb_service_requests_total', { service: 'web@file' }), N + 10)
  assert.equal(sample(m, 'lb_entrypoint_request_duration_seconds_count'), N + 15)
  assert.equal(sample(m, 'lb_entrypoint_request_duration_seconds_bucket', { le: '+Inf' }), N + 15)
  assert.equal(sample(m, 'lb_router_request_duration_seconds_count', { router: 'app@file' }), N + 10)
  assert.ok(sample(m, 'lb_entrypoint_request_duration_seconds_sum') > 0)
  assert.equal(sample(m, 'lb_entrypoint_requests_bytes_total'), 50)
  assert.ok(sample(m, 'lb_entrypoint_responses_bytes_total') >= (N + 10) * 3)
  assert.equal(sample(m, 'lb_requests_total'), N + 15)
  assert.equal(sample(m, 'lb_server_selected_total', { server: 's1' }) + sample(m, 'lb_server_selected_total', { server: 's2' }), N + 10)
  assert.equal(sample(m, 'lb_server_responses_total', { code: '2xx' }), N + 10)
  assert.equal(sample(m, 'lb_service_server_up', { server: 's1' }), 1)
  assert.equal(sample(m, 'lb_server_check_up', { server: 's2' }), 1, 's2 is health-checked')
  assert.equal(sample(m, 'lb_workers'), 2)
  assert.ok(sample(m, 'process_resident_memory_bytes') > 0, 'process metrics')
  assert.match(m, /^# TYPE lb_entrypoint_request_duration_seconds histogram$/m)

  // runtime change and a reload show up
  await sock(a.sock, 'disable server web/s1')
  await reloadApplied(a.lb)
  const m2 = await scrape()
  assert.equal(sample(m2, 'lb_service_server_up', { server: 's1' }), 0)
  assert.equal(sample(m2, 'lb_server_admin_state', { server: 's1', state: 'maint' }), 1)
  assert.equal(sample(m2, 'lb_config_reloads_total'), 1)
  assert.equal(sample(m2, 'lb_config_generation'), 2)
  assert.equal(sample(m2, 'lb_config_last_reload_success'), 1)

  if (promtool === null) return
  let out = ''
  try {
    out = execFileSync(promtool, ['check', 'metrics'], { input: m2, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] })
  } catch (err) {
    const e = err as { stdout: string, stderr: string }
    assert.fail(`promtool check metrics failed:\n${e.stdout}${e.stderr}`)
  }
  assert.equal(out.trim(), '')
})

test('metrics: a client that has its answer finds it counted (proxied with a length, chunked, local error)', async (t) => {
  // Every request is counted before its last byte is written, so a scrape that
  // follows an answer sees it, whichever worker served it: no settling delay.
  const handler: Handler = (req, res) => {
    req.resume()
    if (req.url === '/app/chunked') res.write('chunk') // no length: the response goes chunked
    res.end('\n')
  }
  const [b1, b2] = [await startBackend('b1', handler), await startBackend('b2', handler)]
  const a = await startAdminLb(appConfig(b1.address, b2.address), { workers: 2 })
  t.after(async () => { await a.lb.stop(); await b1.close(); await b2.close() })
  const paths = ['/app/fixed', '/app/chunked', '/nowhere']
  for (let i = 1; i <= 60; i++) {
    const path = paths[i % 3]!
    const r = await request(`${a.lb.url}${path}`) // a new connection each time: either worker
    assert.equal(r.status, path === '/nowhere' ? 404 : 200)
    const m = (await request(`${a.dash}/metrics`)).body
    assert.equal(sample(m, 'lb_entrypoint_requests_total'), i, `request ${i} (${path}) is counted once its client has the answer`)
  }
})

test('metrics: a WebSocket session is counted with protocol "websocket", as Traefik labels it', async (t) => {
  const echo = await startWsEcho('e')
  const a = await startAdminLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.ws]
rule = "PathPrefix(\`/\`)"
service = "ws"
[services.ws]
[[services.ws.servers]]
address = "${echo.address}"
check = false
`)
  t.after(async () => { await a.lb.stop(); await echo.close() })
  const ws = await connect(`ws://127.0.0.1:${a.lb.port}/chat`)
  ws.send('hi')
  assert.equal((await nextMessage(ws)).data.toString(), 'hi')
  ws.close(1000)
  await closed(ws)
  assert.equal((await request(`${a.lb.url}/plain`)).status, 200)
  // the session is counted when it ends
  const m = await waitFor(async () => {
    const body = (await request(`${a.dash}/metrics`)).body
    return sample(body, 'lb_entrypoint_requests_total') >= 2 ? body : null
  }, 'lb_entrypoint_requests_total to count the WebSocket session and the request (2)')
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { code: '101', protocol: 'websocket' }), 1)
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { code: '200', protocol: 'http' }), 1)
  assert.equal(sample(m, 'lb_entrypoint_requests_total', { protocol: 'http', code: '101' }), 0)
  assert.equal(sample(m, 'lb_router_requests_total', { router: 'ws@file', protocol: 'websocket' }), 1)
})
