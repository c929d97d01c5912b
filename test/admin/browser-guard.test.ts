// A web page in a browser on lb's host can reach the loopback management
// listeners: a cross-site POST with a body of no declared type needs no
// preflight, and a name re-pointed to 127.0.0.1 (DNS rebinding) reads and
// writes a listener without credentials. Both are refused (core/admin/browser-guard.ts);
// local tools (curl, promtool, hatop) and the dashboard page's same-origin requests are not.
import assert from 'node:assert/strict'
import http from 'node:http'
import { after, before, test } from 'node:test'
import { type Backend, simpleConfig, startBackend } from '../helpers.js'
import { type AdminLb, startAdminLb } from './util.js'

let b: Backend
let a: AdminLb
before(async () => {
  b = await startBackend('a')
  a = await startAdminLb(simpleConfig([b.address]))
})
after(async () => { await a.lb.stop(); await b.close() })

/** One request with exactly these headers (node adds none but Content-Length). */
function send (port: number, method: string, path: string, headers: Record<string, string>, body = ''): Promise<{ status: number, body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, setHost: false, agent: false }, (res) => {
      let text = ''
      res.on('data', (d: Buffer) => { text += d.toString() })
      res.on('end', () => resolve({ status: res.statusCode!, body: text }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

const SERVERS = '/v2/services/lb/configuration/servers?backend=web'
const server = JSON.stringify({ name: 'evil', address: '203.0.113.9', port: 80 })

test('a cross-site POST with a body of no declared type adds nothing: 403 for its Origin, 415 without one', async () => {
  const host = `127.0.0.1:${a.adminPort}`
  const r = await send(a.adminPort, 'POST', SERVERS, { host, origin: 'https://evil.example' }, server)
  assert.equal(r.status, 403)
  assert.match(JSON.parse(r.body).message, /cross-origin request from "https:\/\/evil\.example" refused/)
  const untyped = await send(a.adminPort, 'POST', SERVERS, { host }, server)
  assert.equal(untyped.status, 415)
  assert.match(JSON.parse(untyped.body).message, /unsupported media type "\(none\)", only \[application\/json\] are allowed/)
  const list = await send(a.adminPort, 'GET', SERVERS, { host })
  assert.equal(list.status, 200)
  assert.doesNotMatch(list.body, /evil/)
})

test('DNS rebinding: a listener without credentials answers only loopback names in Host', async () => {
  for (const port of [a.adminPort, a.dashPort]) {
    const rebound = await send(port, 'GET', port === a.adminPort ? SERVERS : '/api/overview', { host: `attacker.example:${port}` })
    assert.equal(rebound.status, 403, `port ${port}`)
    assert.match(JSON.parse(rebound.body).message, /Host "attacker\.example:\d+" is not a loopback name/)
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `127.0.0.2:${port}`]) {
      assert.equal((await send(port, 'GET', port === a.adminPort ? SERVERS : '/api/overview', { host })).status, 200, host)
    }
  }
})

test('same-origin requests (the dashboard page\'s) and tools that send no Origin are served', async () => {
  const host = `127.0.0.1:${a.dashPort}`
  assert.equal((await send(a.dashPort, 'GET', '/api/overview', { host, origin: `http://${host}` })).status, 200)
  assert.equal((await send(a.dashPort, 'GET', '/metrics', { host })).status, 200)
  const typed = await send(a.adminPort, 'POST', SERVERS, { host: `127.0.0.1:${a.adminPort}`, 'content-type': 'application/json' }, JSON.stringify({ name: 'ok', address: '127.0.0.1', port: 9 }))
  assert.ok([201, 202].includes(typed.status), typed.body)
})
