// While a configuration is being applied (sent to the workers, which answer
// after they rebuilt their tables), the management surfaces keep seeing the
// configuration running, slots included. Before, the slots of the next one
// were visible at once: a runtime change to a server the next configuration
// removes found no slot and wrote word 0 of the shared memory, the layout's
// magic, so the next worker to start refused the memory and never served.
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import { ROOT, getMany, listeners, request, startBackend, waitFor } from '../helpers.js'
import { mwConfig } from '../plugins/setup.js'
import { send, startAdminLb } from './util.js'

const CFG = '/v2/services/lb/configuration'

test('runtime changes racing the removal of their server answer 200 or 404 and leave the shared memory whole', async (t) => {
  const backend = await startBackend('web')
  const crash = `[middlewares.crash]\ntype = "${join(ROOT, 'test', 'fixtures', 'plugins', 'exit-worker.js')}"\n`
  const a = await startAdminLb(mwConfig(backend.address, crash, { '/crash': ['crash'], '/': [] }))
  t.after(async () => { await a.lb.stop(); await backend.close() })
  const statuses = new Map<number, number>()
  for (let round = 0; round < 15; round++) {
    const added = await send('POST', `${a.admin}${CFG}/servers?backend=web`, { name: 'x', address: '127.0.0.1', port: backend.port, check: 'disabled' })
    assert.equal(added.status, 201, added.body)
    // PUTs on x, as fast as lb answers, until one finds x gone; the DELETE's apply lies in between
    let gone = false
    const drain = async (): Promise<void> => {
      while (!gone) {
        const r = await send('PUT', `${a.admin}/v2/services/lb/runtime/servers/x?backend=web`, { admin_state: 'drain' })
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
        if (r.status !== 200) gone = true
      }
    }
    const loops = [drain(), drain(), drain()]
    const removed = await send('DELETE', `${a.admin}${CFG}/servers/x?backend=web`)
    assert.equal(removed.status, 204, removed.body)
    await Promise.all(loops)
  }
  assert.deepEqual([...statuses.keys()].sort(), [200, 404], JSON.stringify(Object.fromEntries(statuses)))
  // a worker that starts now attaches the shared memory only if its header is whole
  await assert.rejects(request(`${a.lb.url}/crash`), /socket hang up|ECONNRESET/)
  await a.lb.logMatching(/worker exited; restarting/)
  await waitFor(() => listeners(a.lb.port) === 2, 'the restarted worker to listen again (2 listening sockets)', 10_000)
  assert.deepEqual([...new Set(await getMany(`${a.lb.url}/ok`, 20))], ['web'])
  assert.doesNotMatch(a.lb.log(), /layout mismatch/)
})
