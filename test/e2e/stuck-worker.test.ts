// A worker whose loop a plugin blocks does not hold up configuration changes:
// a config API write answers once the other workers applied it (after 10 s at
// most), the error names the worker that did not answer, and that worker
// applies the write when its loop is free. Before, the write, and every reload
// and write behind it, waited for the blocked worker.
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { ROOT, getMany, startBackend, tempDir } from '../helpers.js'
import { send, startAdminLb } from '../admin/util.js'
import { mwConfig } from '../plugins/setup.js'

const CFG = '/v2/services/lb/configuration'

test('a worker blocked by a plugin does not hold up a config API write; it applies the write when free', async (t) => {
  const backend = await startBackend('web')
  const trigger = join(tempDir(), 'block-now')
  const blocker = `[middlewares.blocker]
type = "${join(ROOT, 'test', 'fixtures', 'plugins', 'blocking.js')}"
trigger = "${trigger}"
worker = 1
block_ms = 16000
`
  const a = await startAdminLb('[global]\nworkers = 2\n' + mwConfig(backend.address, blocker, { '/': ['blocker'] }))
  t.after(async () => { await a.lb.stop(); await backend.close() })
  // the next configuration's instances block worker 1 for 16 s as they are made
  writeFileSync(trigger, '')
  const r = await send('POST', `${a.admin}${CFG}/backends`, { name: 'while-stuck' })
  const unblocked = /"msg":"unblocked"/.test(a.lb.log())
  assert.equal(r.status, 201, r.body)
  assert.equal(unblocked, false, 'the write was answered only once the blocked worker was free')
  assert.match(a.lb.log(), /worker 1: did not answer within 10 s \(its loop is busy\); it applies this configuration when it is free/)
  // free again, worker 1 applies what it was sent, and both workers serve
  await a.lb.logMatching(/"msg":"unblocked"/, 20_000)
  assert.deepEqual([...new Set(await getMany(`${a.lb.url}/`, 20))], ['web'])
  assert.equal((await send('POST', `${a.admin}${CFG}/backends`, { name: 'after' })).status, 201)
})
