// No request to a management surface, and no exception in the
// control plane, ends the process or stops the data plane. Every route of the
// config API and the dashboard listener gets malformed escapes, over-long
// paths and random bytes; then the data plane must still answer, the process
// be alive, and a control-plane exception be logged with its stack and counted.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import net from 'node:net'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { type Backend, ROOT, request, startBackend, simpleConfig } from '../helpers.js'
import { type AdminLb, sock, startAdminLb, waitLog } from './util.js'

let a: AdminLb
let backend: Backend

/** One raw request (no client library to clean the target up); resolves with the status line ('' if none). */
function raw (port: number, bytes: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1')
    let out = ''
    c.setEncoding('latin1')
    c.on('data', (d: string) => { out += d })
    c.on('error', () => resolve(out.split('\r\n')[0]!))
    c.on('close', () => resolve(out.split('\r\n')[0]!))
    c.on('connect', () => c.end(bytes))
  })
}

const req = (method: string, path: string): string =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`

/** Routes listed by GET /help on a listener: [method, path with {params}]. */
async function routes (base: string): Promise<Array<[string, string]>> {
  const help = (await request(`${base}/help`)).body
  return [...help.matchAll(/^ {2}(GET|POST|PUT|DELETE) (\/\S*)/gm)].map((m) => [m[1]!, m[2]!])
}

before(async () => {
  backend = await startBackend('b1')
  a = await startAdminLb(simpleConfig([backend.address]), {
    nodeArgs: ['--import', join(ROOT, 'dist', 'test', 'fixtures', 'faults', 'bug-on-signal.js')],
  })
})

after(async () => {
  await a?.lb.stop()
  await backend?.close()
})

test('malformed escapes in every route with a {param} answer 400, never 500 nor a crash', async () => {
  const BAD = ['%E9', '%', '%zz', '%C3%28', '%ff%fe%fd', '%E9%E9%E9']
  let sent = 0
  for (const [base, port] of [[a.admin, a.adminPort], [a.dash, a.dashPort]] as const) {
    const table = await routes(base)
    assert.ok(table.length > 0, `no routes listed by ${base}/help`)
    for (const [method, path] of table) {
      if (!path.includes('{')) continue
      for (const bad of BAD) {
        const target = path.replace(/\{\w+\}/g, bad)
        const status = await raw(port, req(method, target))
        assert.match(status, /^HTTP\/1\.1 400 /, `${method} ${target} on ${base}: ${status}`)
        sent++
      }
    }
  }
  assert.ok(sent > 20, `only ${sent} requests had a {param} route to go to`)
})

test('over-long paths, invalid targets and random bytes on every route get an answer or a close, never a crash', async () => {
  for (const [base, port] of [[a.admin, a.adminPort], [a.dash, a.dashPort]] as const) {
    for (const [method, path] of await routes(base)) {
      for (const target of [path + '/' + 'a'.repeat(8_000), path.replace(/\{\w+\}/g, 'x'.repeat(70_000)), `http://[${path}`, path + '%']) {
        const status = await raw(port, req(method, target))
        assert.doesNotMatch(status, / 500 /, `${method} ${target.slice(0, 60)}... on ${base}`)
      }
    }
    for (let i = 0; i < 50; i++) await raw(port, randomBytes(1 + (i * 97) % 4096))
    for (let i = 0; i < 20; i++) await raw(port, Buffer.concat([Buffer.from('GET /'), randomBytes(200), Buffer.from(' HTTP/1.1\r\n\r\n')]))
  }
  for (let i = 0; i < 20; i++) await sock(a.sock, randomBytes(300).toString('latin1').replace(/\n/g, ' '))
  assert.equal(a.lb.proc.exitCode, null, `lb exited: ${a.lb.log()}`)
  assert.equal((await request(`${a.lb.url}/`)).status, 200, 'the data plane no longer answers')
  assert.equal((await request(`${a.admin}/v2/services/lb/configuration/backends`)).status, 200, 'the config API no longer answers')
})

test('an exception thrown outside any handler in the control plane is logged with its stack, counted, and the process carries on', async () => {
  a.lb.proc.kill('SIGUSR2')
  await waitLog(a.lb, /injected control-plane bug.*\\n\s+at /)
  await waitLog(a.lb, /injected control-plane rejection/)
  assert.equal(a.lb.proc.exitCode, null, `lb exited: ${a.lb.log()}`)
  assert.equal((await request(`${a.lb.url}/`)).status, 200, 'the data plane no longer answers')
  const metrics = (await request(`${a.dash}/metrics`)).body
  const n = Number(/^lb_control_plane_errors_total (\d+)$/m.exec(metrics)?.[1])
  assert.ok(n >= 2, `lb_control_plane_errors_total is ${n}`)
})
