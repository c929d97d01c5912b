// nginx stub_status text, its counters over all workers, its address rule; the access log.
import { strict as assert } from 'node:assert'
import { existsSync, readFileSync } from 'node:fs'
import http from 'node:http'
import { test } from 'node:test'
import { request, startBackend, startLb, waitFor } from '../helpers.js'

const STUB = /^Active connections: (\d+) \nserver accepts handled requests\n (\d+) (\d+) (\d+) \nReading: (\d+) Writing: (\d+) Waiting: (\d+) \n$/

test('status page: exact stub_status format, counters moving with traffic, loopback only, GET/HEAD only', async (t) => {
  const web = await startBackend('web')
  const lb = await startLb(`
[global]
workers = 2
access_log = "{{DIR}}/access.log"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.status]
rule = "Path(\`/status\`)"
service = "status"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.status]
kind = "status"
[services.web]
[[services.web.servers]]
address = "${web.address}"
check = false
`)
  t.after(async () => { await lb.stop(); await web.close() })
  // the status page is read over one keep-alive connection of its own
  const statusAgent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.after(() => statusAgent.destroy())
  const first = await request(`${lb.url}/status`, { agent: statusAgent })
  assert.equal(first.status, 200)
  assert.equal(first.headers['content-type'], 'text/plain')
  assert.equal(Number(first.headers['content-length']), Buffer.byteLength(first.body))
  const m1 = STUB.exec(first.body)
  assert.ok(m1, JSON.stringify(first.body))
  // 40 requests over 4 keep-alive connections that stay open, spread over both workers
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })
  await Promise.all(Array.from({ length: 40 }, () => request(`${lb.url}/x`, { agent })))
  const m2 = STUB.exec((await request(`${lb.url}/status`, { agent: statusAgent })).body)!
  assert.equal(Number(m2[4]) - Number(m1[4]), 41, 'requests: 40 proxied + this status request')
  // connections are counted as they open and close: the 4 kept open and the status page's own
  assert.equal(Number(m2[1]), 5, 'active: 4 idle keep-alive connections and this one')
  assert.equal(Number(m2[2]) - Number(m1[2]), 4, 'accepts: the 4 new connections')
  assert.equal(m2[2], m2[3], 'handled = accepts')
  assert.equal(Number(m2[6]), 1, 'Writing: this request')
  assert.equal(Number(m2[1]), Number(m2[5]) + Number(m2[6]) + Number(m2[7]), 'active = reading + writing + waiting')
  agent.destroy()
  // a client from another address gets 403, other methods 405
  const other = await request(`${lb.url}/status`, { localAddress: '127.0.0.2' })
  assert.equal(other.status, 403)
  assert.equal((await request(`${lb.url}/status`, { method: 'POST', body: 'x' })).status, 405)
  assert.equal((await request(`${lb.url}/status`, { method: 'HEAD' })).status, 200)
  // access log: one JSON line per request, health probes excluded
  await request(`${lb.url}/health`)
  await request(`${lb.url}/logged?q=1`, { headers: { 'user-agent': 't' } })
  // each worker flushes its log lines every 100 ms, each on its own: wait for every request's line (whole lines
  // only): 2 status pages, 40 proxied, 403, 405, HEAD and /logged (a wait for fewer once missed the HEAD's line)
  const lines = (await waitFor(() => {
    const file = `${lb.dir}/access.log`
    const whole = existsSync(file) ? readFileSync(file, 'utf8').split('\n').slice(0, -1) : []
    return whole.length >= 46 ? whole : null
  }, '46 access log lines')).map((l) => JSON.parse(l) as Record<string, unknown>)
  assert.equal(lines.length, 46)
  assert.equal(lines.filter((l) => l.path === '/health').length, 0)
  const logged = lines.find((l) => l.path === '/logged?q=1')!
  assert.equal(logged.status, 200)
  assert.equal(logged.method, 'GET')
  assert.equal(logged.client, '127.0.0.1')
  assert.equal(logged.router, 'web')
  assert.equal(logged.service, 'web')
  assert.equal(logged.server, 's1')
  assert.equal(typeof logged.duration_ms, 'number')
  const forbidden = lines.find((l) => l.status === 403)!
  assert.equal(forbidden.client, '127.0.0.2')
  // answers the balancer writes itself count their body bytes too (nginx's $body_bytes_sent); HEAD sends none
  assert.equal(forbidden.bytes_out, Buffer.byteLength(other.body))
  const statusLines = lines.filter((l) => l.path === '/status' && l.status === 200)
  assert.ok(statusLines.some((l) => l.method === 'GET' && l.bytes_out === first.body.length), JSON.stringify(statusLines[0]))
  assert.ok(statusLines.some((l) => l.method === 'HEAD' && l.bytes_out === 0))
})
