// Signals (reload, drain). The connection cap: test/e2e/connections.test.ts; runtimes lb refuses: test/core/uws-native.test.ts.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import { test } from 'node:test'
import { count, getMany, listeners, request, simpleConfig, startBackend, startLb, waitFor } from '../helpers.js'

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
  t.after(() => { stop = true }) // also when a step fails: a loop left running keeps the file from ending
  // each step waits for traffic to flow (the next 30 requests answered), not for time
  const traffic = async (step: string): Promise<void> => {
    const from = done + failures.length
    await waitFor(() => done + failures.length >= from + 30, `30 requests ${step}`, 10_000, 5)
  }
  await traffic('before the first reload')
  lb.write(simpleConfig([a.address, b.address]))
  lb.reload()
  await lb.logMatching(/"generation":2/)
  await traffic('after the first reload')
  lb.write('this is [not toml')
  lb.reload()
  await lb.logMatching(/reload rejected/)
  await traffic('after the rejected reload')
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
  await waitFor(() => release !== null, 'the request to reach the slow server')
  const exit = lb.stop('SIGTERM')
  // draining: every worker closes its listening socket (asserted below: a connect is refused)
  await waitFor(() => listeners(lb.port) === 0, `lb's workers to stop listening on ${lb.port} after SIGTERM`)
  await assert.rejects(request(`${lb.url}/`), /ECONNREFUSED/, 'new connections are refused while draining')
  release!()
  assert.equal((await inflight).body, 'finished\n')
  assert.equal(await exit, 0)
})
