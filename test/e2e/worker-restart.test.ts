// A data-plane worker that dies is restarted; the other keeps serving meanwhile.
import { strict as assert } from 'node:assert'
import { join } from 'node:path'
import { test } from 'node:test'
import { ROOT, getMany, request, sleep, startBackend, startLb } from '../helpers.js'

test('a dead worker is restarted and traffic continues', async (t) => {
  const web = await startBackend('web')
  const lb = await startLb(`
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
address = "${web.address}"
check = false
`)
  t.after(async () => { await lb.stop(); await web.close() })
  await assert.rejects(request(`${lb.url}/crash`), /socket hang up|ECONNRESET/)
  await lb.logMatching(/worker exited; restarting/)
  assert.match(lb.log(), /"msg":"worker exited; restarting".*"code":7/)
  // whichever worker the kernel picks, every request is served, during and after the restart
  const bodies = await getMany(`${lb.url}/ok`, 40)
  assert.deepEqual([...new Set(bodies)], ['web'])
  await sleep(300)
  const again = await getMany(`${lb.url}/ok`, 40)
  assert.deepEqual([...new Set(again)], ['web'])
})
