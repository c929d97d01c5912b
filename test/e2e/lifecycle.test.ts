// Signals (reload, drain), refusal to run on uWS's JS fallback, the global connection cap.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import net from 'node:net'
import { test } from 'node:test'
import { count, getMany, request, simpleConfig, sleep, startBackend, startLb } from '../helpers.js'

test('SIGHUP reloads under traffic with no failed request; an invalid file is rejected and the old config stays', async (t) => {
  const a = await startBackend('a')
  const b = await startBackend('b')
  const lb = await startLb(simpleConfig([a.address]))
  t.after(async () => { await lb.stop(); await a.close(); await b.close() })
  let stop = false
  const failures: string[] = []
  let done = 0
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })
  const load = async (withAgent: boolean): Promise<void> => {
    while (!stop) {
      try {
        const r = await request(`${lb.url}/`, withAgent ? { agent } : {})
        if (r.status !== 200) failures.push(`${r.status} ${r.body}`)
        done++
      } catch (err) {
        failures.push((err as Error).message)
      }
    }
  }
  const loops = [load(true), load(true), load(false), load(false)]
  await sleep(200)
  lb.write(simpleConfig([a.address, b.address]))
  lb.reload()
  await lb.logMatching(/"generation":2/)
  await sleep(200)
  lb.write('this is [not toml')
  lb.reload()
  await lb.logMatching(/reload rejected/)
  await sleep(200)
  stop = true
  await Promise.all(loops)
  agent.destroy()
  assert.deepEqual(failures, [])
  assert.ok(done > 100, `${done} requests during the reloads`)
  assert.match(lb.log(), /reload rejected: the running configuration stays.*TOML syntax error/)
  assert.deepEqual(count(await getMany(lb.url, 10)), { a: 5, b: 5 }, 'the second (valid) config is still in force')
})

test('SIGTERM stops accepting, lets requests in flight finish and exits 0', async (t) => {
  let release: (() => void) | null = null
  const slow = await startBackend('slow', (req, res) => { req.resume(); release = () => res.end('finished\n') })
  const lb = await startLb(simpleConfig([slow.address]))
  t.after(() => slow.close())
  const inflight = request(`${lb.url}/`)
  for (let i = 0; i < 100 && release === null; i++) await sleep(10)
  const exit = lb.stop('SIGTERM')
  await sleep(300)
  await assert.rejects(request(`${lb.url}/`), /ECONNREFUSED/, 'new connections are refused while draining')
  release!()
  assert.equal((await inflight).body, 'finished\n')
  assert.equal(await exit, 0)
})

test('refuses to start when uWebSockets.js falls back to its JS implementation', async () => {
  const a = await startBackend('a')
  try {
    await assert.rejects(startLb(simpleConfig([a.address]), { env: { UWS_USE_FALLBACK: '1' } }), (err: Error) => {
      assert.match(err.message, /lb exited with 1/)
      assert.match(err.message, /uWebSockets\.js native binary did not load .*refusing to run on its slow JS fallback/)
      return true
    })
  } finally {
    await a.close()
  }
})

test('beyond max_connections new connections are refused cleanly, and accepted again once below', async (t) => {
  const a = await startBackend('a')
  const lb = await startLb(simpleConfig([a.address]).replace('[entrypoints.web]', '[global]\nworkers = 2\naccess_log = "off"\nmax_connections = 3\n\n[entrypoints.web]'))
  t.after(async () => { await lb.stop(); await a.close() })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 3 })
  await Promise.all(Array.from({ length: 3 }, () => request(`${lb.url}/`, { agent })))
  // near the cap the kernel census runs every 250 ms (longer on a host with many sockets)
  const attempt = (): Promise<string> => new Promise((res) => {
    const s = net.connect(lb.port, '127.0.0.1')
    s.on('connect', () => { s.destroy(); res('connected') })
    s.on('error', (err: NodeJS.ErrnoException) => res(err.code ?? err.message))
  })
  let refused = await attempt()
  for (let i = 0; i < 30 && refused === 'connected'; i++) {
    await sleep(100)
    refused = await attempt()
  }
  assert.equal(refused, 'ECONNREFUSED')
  // the open connections still work
  assert.equal((await request(`${lb.url}/`, { agent })).status, 200)
  agent.destroy()
  // below the cap again: the next census lets the workers listen again
  let back = await attempt()
  for (let i = 0; i < 30 && back !== 'connected'; i++) {
    await sleep(100)
    back = await attempt()
  }
  assert.equal(back, 'connected')
  assert.equal((await request(`${lb.url}/`)).status, 200)
})
