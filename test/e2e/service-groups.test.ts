// Services of services (Traefik's `weighted` and `failover`), through the real
// balancer with two workers and real backends: a canary by weight (3:1 over 400
// requests on new connections; a service with no server up is skipped), a
// failover that moves to its fallback when the main service's servers are down
// (runtime socket: maint) and back when one returns, a group inside a group,
// WebSocket through a group, and the config errors (unknown service, a cycle,
// a status service in a group). The dashboard API shows them as Traefik's.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, count, request, startBackend } from '../helpers.js'
import { type AdminLb, sock, startAdminLb } from '../admin/util.js'
import { connect, nextMessage, startWsEcho, type WsEcho } from '../ws/echo.js'
import { problems } from '../plugins/setup.js'

const head = `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.r]
rule = "PathPrefix(\`/\`)"
service = "g"
`
const svc = (name: string, address = '127.0.0.1:1'): string => `[services.${name}]\n[[services.${name}.servers]]\nname = "${name}1"\naddress = "${address}"\ncheck = false\n`

describe('weighted and failover: config validation', () => {
  test('the services they name exist, have servers or are groups, and never contain the group', () => {
    assert.match(problems(head + '[services.g]\nkind = "weighted"\n'), /services\.g\.services: expected at least one \[\[services\.g\.services\]\]/)
    assert.match(problems(head + '[services.g]\nkind = "weighted"\n[[services.g.services]]\nname = "nope"\n'), /services\.g: unknown service "nope"/)
    assert.match(problems(head + svc('a') + '[services.g]\nkind = "weighted"\n[[services.g.services]]\nname = "a"\nweight = 0\n'), /services\.g\.services: at least one weight above 0/)
    assert.match(problems(head + '[services.st]\nkind = "status"\n[services.g]\nkind = "failover"\nservice = "st"\nfallback = "st2"\n[services.st2]\nkind = "status"\n'), /service "st" is of kind "status"/)
    assert.match(problems(head + svc('a') + '[services.g]\nkind = "failover"\nservice = "h"\nfallback = "a"\n[services.h]\nkind = "weighted"\n[[services.h.services]]\nname = "g"\n'),
      /services\.g: a service group cannot contain itself \(g → h → g\)/)
    assert.match(problems(head + svc('a') + '[services.g]\nkind = "failover"\nservice = "a"\nfallback = "a"\n'), /services\.g\.fallback: the same service as services\.g\.service/)
    assert.match(problems(head + svc('a') + '[services.g]\nkind = "failover"\nservice = "a"\n'), /services\.g\.fallback: expected a string/)
    assert.match(problems(head + svc('a') + svc('b') + '[services.g]\nkind = "failover"\nservice = "a"\nfallback = "b"\n[[services.g.services]]\nname = "a"\n'), /services\.g\.services: not a key of a failover service/)
    assert.match(problems(head + svc('a') + '[services.g]\nkind = "weighted"\n[[services.g.services]]\nname = "a"\n[[services.g.servers]]\naddress = "127.0.0.1:2"\n'), /services\.g\.servers: a weighted service has no servers/)
  })
})

describe('weighted and failover through the balancer', () => {
  let v1: Backend, v2: Backend, dead: Backend, main: WsEcho, backup: WsEcho
  let a: AdminLb
  const get = async (path: string): Promise<string> => (await request(a.lb.url + path)).body.trim()
  const many = async (path: string, n: number): Promise<Record<string, number>> => {
    const out: string[] = []
    for (let i = 0; i < n; i += 20) out.push(...await Promise.all(Array.from({ length: Math.min(20, n - i) }, () => get(path))))
    return count(out)
  }

  before(async () => {
    ;[v1, v2, dead, main, backup] = await Promise.all([startBackend('v1'), startBackend('v2'), startBackend('dead'), startWsEcho('main'), startWsEcho('backup')])
    a = await startAdminLb(`[global]
workers = 2
access_log = "off"

[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.canary]
rule = "PathPrefix(\`/canary\`)"
service = "canary"
[routers.safe]
rule = "PathPrefix(\`/safe\`)"
service = "safe"
[routers.nested]
rule = "PathPrefix(\`/nested\`)"
service = "nested"

[services.canary]
kind = "weighted"
[[services.canary.services]]
name = "v1"
weight = 3
[[services.canary.services]]
name = "v2"
weight = 1
[[services.canary.services]]
name = "dead"
weight = 100

[services.safe]
kind = "failover"
service = "main"
fallback = "backup"

[services.nested]
kind = "failover"
service = "dead"
fallback = "canary"

${svc('v1', v1.address)}${svc('v2', v2.address)}${svc('dead', dead.address)}${svc('main', main.address)}${svc('backup', backup.address)}`)
    // "dead" is in maintenance from the start: the canary's 100 must be skipped
    assert.equal(await sock(a.sock, 'set server dead/dead1 state maint'), '\n')
  })
  after(async () => {
    await a?.lb.stop()
    await Promise.all([v1, v2, dead, main, backup].map((b) => b?.close()))
  })

  test('weighted: 3 to 1 over the services with a server up (both workers, 400 requests on new connections)', async () => {
    const c = await many('/canary', 400)
    assert.equal(c.dead, undefined, 'a service with no server up takes nothing')
    assert.equal((c.v1 ?? 0) + (c.v2 ?? 0), 400)
    // smooth weighted round robin in each worker: exactly 3:1 per worker, whatever way the requests split
    assert.ok(Math.abs(c.v1! - 300) <= 4 && Math.abs(c.v2! - 100) <= 4, JSON.stringify(c))
  })

  test('failover: the main service while it has a server up, the fallback when not, and back', async () => {
    assert.deepEqual(await many('/safe', 20), { main: 20 })
    assert.equal(await sock(a.sock, 'set server main/main1 state maint'), '\n')
    assert.deepEqual(await many('/safe', 20), { backup: 20 })
    assert.equal(await sock(a.sock, 'set server main/main1 state ready'), '\n')
    assert.deepEqual(await many('/safe', 20), { main: 20 })
  })

  test('a WebSocket through a failover reaches the service it picks', async () => {
    assert.equal(await sock(a.sock, 'set server main/main1 state maint'), '\n')
    try {
      const ws = await connect(`ws://127.0.0.1:${a.lb.port}/safe`)
      ws.send('name?')
      assert.equal((await nextMessage(ws)).data.toString(), 'backup')
      ws.close()
    } finally {
      assert.equal(await sock(a.sock, 'set server main/main1 state ready'), '\n')
    }
  })

  test('a group inside a group: failover to a weighted service', async () => {
    const c = await many('/nested', 40)
    assert.deepEqual(Object.keys(c).sort(), ['v1', 'v2'])
  })

  test('the dashboard API shows them as Traefik\'s', async () => {
    const one = async (name: string): Promise<Record<string, unknown>> => JSON.parse((await request(`${a.dash}/api/http/services/${name}@file`)).body) as Record<string, unknown>
    const canary = await one('canary')
    assert.equal(canary.type, 'weighted')
    assert.deepEqual(canary.weighted, { services: [{ name: 'v1', weight: 3 }, { name: 'v2', weight: 1 }, { name: 'dead', weight: 100 }] })
    const safe = await one('safe')
    assert.equal(safe.type, 'failover')
    assert.deepEqual(safe.failover, { service: 'main', fallback: 'backup' })
  })
})
