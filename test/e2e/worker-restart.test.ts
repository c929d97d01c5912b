// A data-plane worker that dies is restarted; the other keeps serving meanwhile.
import { strict as assert } from 'node:assert'
import { join } from 'node:path'
import { test } from 'node:test'
import { ROOT, getMany, listeners, request, startBackend, startLb, waitFor } from '../helpers.js'
import { sock, startAdminLb } from '../admin/util.js'

/** One server, b1, behind the exit-worker fixture plugin. */
function crashConfig (address: string): string {
  return `
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[middlewares.crash]
type = "${join(ROOT, 'test', 'fixtures', 'plugins', 'exit-worker.js')}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
middlewares = ["crash"]
[services.web]
[[services.web.servers]]
name = "b1"
address = "${address}"
check = false
`
}

test('a dead worker is restarted and traffic continues', async (t) => {
  const web = await startBackend('web')
  const lb = await startLb(crashConfig(web.address))
  t.after(async () => { await lb.stop(); await web.close() })
  await assert.rejects(request(`${lb.url}/crash`), /socket hang up|ECONNRESET/)
  await lb.logMatching(/worker exited; restarting/)
  assert.match(lb.log(), /"msg":"worker exited; restarting".*"code":7/)
  // whichever worker the kernel picks, every request is served, during and after the restart
  const bodies = await getMany(`${lb.url}/ok`, 40)
  assert.deepEqual([...new Set(bodies)], ['web'])
  // the restarted worker listens again: both workers' sockets are in the kernel's SO_REUSEPORT group
  await waitFor(() => listeners(lb.port) === 2, 'the restarted worker to listen again (2 listening sockets)', 10_000)
  const again = await getMany(`${lb.url}/ok`, 40)
  assert.deepEqual([...new Set(again)], ['web'])
})

test('what a dead worker had in flight is not counted after it is gone', async (t) => {
  const web = await startBackend('web')
  // web is the second FRONTEND: its row counts its own connections
  const a = await startAdminLb(`[entrypoints.other]\naddress = "127.0.0.1:0"\n${crashConfig(web.address)}`)
  t.after(async () => { await a.lb.stop(); await web.close() })
  // the worker dies between the server's answer and the client's: one request in flight to b1
  await assert.rejects(request(`${a.lb.url}/crash-in-flight`), /socket hang up|ECONNRESET/)
  await a.lb.logMatching(/worker exited; restarting/)
  const scur = (await sock(a.sock, 'show stat web 4 -1')).split('\n')[1]!.split(',')[4]
  assert.equal(scur, '0', 'scur (requests in flight) of web/b1')
  // the connection of that request closed with the worker
  const fe = (await sock(a.sock, 'show stat web 1 -1')).split('\n')[1]!.split(',')
  assert.deepEqual([fe[1], fe[4], fe[7]], ['FRONTEND', '0', '1'], 'svname, scur and stot of the web FRONTEND')
  const metrics = (await request(`${a.dash}/metrics`)).body
  assert.match(metrics, /^lb_requests_in_progress 0$/m)
  assert.match(metrics, /^lb_server_inflight_requests\{service="web@file",server="b1"\} 0$/m)
})
