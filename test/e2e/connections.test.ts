// Client connections are counted as they open and close (uWS App.filter,
// core/worker/connections.ts): every surface (stub_status, `show info`,
// `show stat` FRONTEND, /metrics) agrees exactly with what the clients did,
// short connections included, and global.max_connections holds per connection.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import net from 'node:net'
import { test } from 'node:test'
import { type Backend, request, sleep, startBackend, startLb, waitFor } from '../helpers.js'
import { sock, startAdminLb } from '../admin/util.js'
import { closed, connect, nextMessage, startWsEcho } from '../ws/echo.js'

const STUB_STATUS = /^Active connections: (\d+) \nserver accepts handled requests\n (\d+) (\d+) (\d+) \n/
const N = 25

/** One request on a fresh connection that asks to close; resolves with what came back once the server closed it (reset included). */
function shortRequest (port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.write('GET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n'))
    let out = ''
    s.setEncoding('latin1')
    s.on('data', (d: string) => { out += d })
    s.on('error', (err: NodeJS.ErrnoException) => { if (err.code !== 'ECONNRESET') reject(err) })
    s.on('close', () => resolve(out))
  })
}

function config (backend: Pick<Backend, 'address'>, extra = '', engine: Engine = 'uws'): string {
  return `
[global]
workers = 2
access_log = "off"
${extra}
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
engine = "${engine}"
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
address = "${backend.address}"
check = false
`
}

type Engine = 'uws' | 'node'

interface Counts { active: number, accepts: number, handled: number }

/** The connection counts of lb's stub_status page, read over `agent`. */
async function stubStatus (url: string, agent: http.Agent): Promise<Counts> {
  const r = await request(`${url}/status`, { agent })
  assert.equal(r.status, 200)
  const m = STUB_STATUS.exec(r.body)
  assert.ok(m !== null, r.body)
  return { active: Number(m[1]), accepts: Number(m[2]), handled: Number(m[3]) }
}

// the same counts whatever parses the requests: uWS's App.filter, or the node engine's net.Server (transport/node/engine.ts)
for (const engine of ['uws', 'node'] as const) {
  test(`${engine}: N short connections, N keep-alive connections and WebSockets: every surface counts exactly N`, async (t) => {
    const web = await startWsEcho('web') // answers HTTP requests too
    const a = await startAdminLb(config(web, '', engine))
    t.after(async () => { await a.lb.stop(); await web.close() })
    // the status page is read over one keep-alive connection of its own: it counts as one open connection
    const statusAgent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    t.after(() => statusAgent.destroy())
    const stub = (): Promise<Counts> => stubStatus(a.lb.url, statusAgent)
    const info = async (): Promise<Counts> => {
      const lines = Object.fromEntries((await sock(a.sock, 'show info')).trim().split('\n').map((l) => l.split(': ')))
      return { active: Number(lines.CurrConns), accepts: Number(lines.CumConns), handled: Number(lines.CumConns) }
    }
    const stat = async (): Promise<Counts> => {
      const [head, ...rows] = (await sock(a.sock, 'show stat')).trim().split('\n')
      const cols = head!.replace(/^# /, '').split(',')
      const fe = rows.map((r) => r.split(',')).find((r) => r[0] === 'web' && r[1] === 'FRONTEND')!
      const col = (name: string): number => Number(fe[cols.indexOf(name)])
      return { active: col('scur'), accepts: col('stot'), handled: col('stot') }
    }
    const metrics = async (): Promise<Counts> => {
      const text = (await request(`${a.dash}/metrics`)).body
      const value = (re: RegExp): number => Number(re.exec(text)![1])
      const accepts = value(/^lb_connections_accepted_total (\d+)$/m)
      return { active: value(/^lb_open_connections\{protocol="http"\} (\d+)$/m), accepts, handled: accepts - value(/^lb_overload_refusals_total (\d+)$/m) }
    }
    /** Waits until the status page shows `active` open connections, then reads every surface. */
    const settle = async (active: number): Promise<Counts[]> => {
      await waitFor(async () => (await stub()).active === active, `the status page to show ${active} open connections`)
      return Promise.all([stub(), info(), stat(), metrics()])
    }

    const [base] = await settle(1)
    assert.deepEqual(base, { active: 1, accepts: 1, handled: 1 }, 'only the status connection so far')

    // N short connections, one after the other: each one is counted though it lives for a millisecond
    for (let i = 0; i < N; i++) assert.match(await shortRequest(a.lb.port), /^HTTP\/1\.1 200 /)
    for (const [i, c] of (await settle(1)).entries()) {
      assert.deepEqual(c, { active: 1, accepts: 1 + N, handled: 1 + N }, `surface ${['stub_status', 'show info', 'show stat', 'metrics'][i]}`)
    }

    // N keep-alive connections open at once, one request each
    const agent = new http.Agent({ keepAlive: true, maxSockets: N })
    await Promise.all(Array.from({ length: N }, () => request(`${a.lb.url}/y`, { agent })))
    assert.equal(Object.values(agent.freeSockets).flat().length, N, 'the client holds N idle connections')
    for (const [i, c] of (await settle(1 + N)).entries()) {
      assert.deepEqual(c, { active: 1 + N, accepts: 1 + 2 * N, handled: 1 + 2 * N }, `surface ${['stub_status', 'show info', 'show stat', 'metrics'][i]}`)
    }
    agent.destroy()
    for (const c of await settle(1)) assert.deepEqual(c, { active: 1, accepts: 1 + 2 * N, handled: 1 + 2 * N })

    // WebSockets: an upgraded connection's close comes through the WebSocket route (uWS's filter never sees it)
    const sockets = await Promise.all([1, 2, 3].map(() => connect(`ws://127.0.0.1:${a.lb.port}/ws`)))
    for (const ws of sockets) {
      const echoed = nextMessage(ws)
      ws.send('hi')
      assert.equal((await echoed).data.toString(), 'hi')
    }
    for (const c of await settle(4)) assert.deepEqual(c, { active: 4, accepts: 4 + 2 * N, handled: 4 + 2 * N })
    for (const ws of sockets) ws.close(1000)
    await Promise.all(sockets.map(closed))
    for (const c of await settle(1)) assert.deepEqual(c, { active: 1, accepts: 4 + 2 * N, handled: 4 + 2 * N })
  })

  test(`${engine}: global.max_connections: a connection over the cap is closed at once and counted as not handled`, async (t) => {
    const web = await startBackend('web')
    const lb = await startLb(config(web, 'max_connections = 3', engine))
    t.after(async () => { await lb.stop(); await web.close() })
    const agent = new http.Agent({ keepAlive: true, maxSockets: 3 })
    await Promise.all(Array.from({ length: 3 }, () => request(`${lb.url}/`, { agent })))
    // the fourth connection is accepted by the kernel and closed by lb before any answer, every time
    for (let i = 0; i < 5; i++) assert.equal(await shortRequest(lb.port), '')
    // the open ones still work
    let c = await stubStatus(lb.url, agent)
    // lb counts a refused connection's close a moment after its client saw it (engine = "node" on Node 22: the
    // socket's 'close' comes a turn later; CI once read 4 open here): read again for up to 1 s, then check the last
    await waitFor(async () => (c = await stubStatus(lb.url, agent)).active === 3, 'active 3', 1000).catch(() => {})
    assert.deepEqual([c.active, c.accepts, c.handled], [3, 8, 3], 'active 3, accepts 3 + 5, handled 3')
    // below the cap again: new connections are served at once
    agent.destroy()
    let reply = ''
    for (let i = 0; i < 100 && reply === ''; i++) {
      reply = await shortRequest(lb.port)
      if (reply === '') await sleep(20)
    }
    assert.match(reply, /^HTTP\/1\.1 200 /)
  })
}
