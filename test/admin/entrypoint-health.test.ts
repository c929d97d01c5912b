// The health location lb answers itself is a per-entry-point setting
// (`health`: a path, default "/health", or "off"), answered for GET and HEAD
// only: an application's own /health behind lb is reachable where lb's is off
// or elsewhere, and other methods on it are routed like any request.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { loadConfig } from '../../core/configure.js'
import { request, startBackend, startLb } from '../helpers.js'

test('entry point health path: default, moved, off; GET and HEAD only', async (t) => {
  const app = await startBackend('app')
  const lb = await startLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.moved]
address = "127.0.0.1:0"
health = "/lb-health"
[entrypoints.off]
address = "127.0.0.1:0"
health = "off"
[routers.all]
rule = "PathPrefix(\`/\`)"
service = "app"
[services.app]
[[services.app.servers]]
name = "a1"
address = "${app.address}"
check = false
`)
  t.after(async () => { await lb.stop(); await app.close() })
  const reached = (): string[] => app.requests.map((r) => `${r.method} ${r.url}`)

  let r = await request(`${lb.url}/health`)
  assert.deepEqual([r.status, r.body], [200, 'OK\n'], 'lb answers its default health path')
  r = await request(`${lb.url}/health`, { method: 'HEAD' })
  assert.deepEqual([r.status, r.body], [200, ''])
  assert.deepEqual(reached(), [], 'GET and HEAD never reach the application')
  r = await request(`${lb.url}/health`, { method: 'POST', body: 'x' })
  assert.deepEqual([r.status, r.body], [200, 'app\n'], 'another method is routed')
  assert.deepEqual(reached(), ['POST /health'])

  const moved = `http://127.0.0.1:${await lb.portOf('moved')}`
  r = await request(`${moved}/lb-health`)
  assert.deepEqual([r.status, r.body], [200, 'OK\n'])
  r = await request(`${moved}/health`)
  assert.deepEqual([r.status, r.body], [200, 'app\n'], "the application's own /health is reachable")

  const off = `http://127.0.0.1:${await lb.portOf('off')}`
  r = await request(`${off}/health`)
  assert.deepEqual([r.status, r.body], [200, 'app\n'])
  r = await request(`${off}/health`, { method: 'HEAD' })
  assert.equal(r.status, 200)
  assert.deepEqual(reached(), ['POST /health', 'GET /health', 'GET /health', 'HEAD /health'])

  // a bad value names the key, what is expected and what was found
  const dir = mkdtempSync(join(tmpdir(), 'lb-health-conf-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'lb.toml')
  for (const [value, where] of [['"health"', 'http'], ['true', 'http'], ['"/ok"', 'tcp']] as const) {
    writeFileSync(file, where === 'http'
      ? `[entrypoints.web]\naddress = "127.0.0.1:1"\nhealth = ${value}\n`
      : `[entrypoints.db]\naddress = "127.0.0.1:1"\nprotocol = "tcp"\nservice = "x"\nhealth = ${value}\n[services.x]\n[[services.x.servers]]\naddress = "127.0.0.1:2"\n`)
    assert.throws(() => loadConfig(file), (err: Error) => {
      assert.match(err.message, where === 'http' ? /entrypoints\.web\.health: expected a path like "\/health", or "off"/ : /entrypoints\.db\.health: only for protocol = "http" or "https"/)
      return true
    })
  }
})
