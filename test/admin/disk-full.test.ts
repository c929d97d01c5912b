// The config API on a real full disk (its state file on a small tmpfs, filled
// to the last byte): a write is refused with 507 Insufficient Storage in the
// Data Plane API's error shape, naming ENOSPC and the file; no temp file is
// left, the old state file stays whole and the running configuration and
// version do not change. A transaction whose commit is refused so stays open
// and commits once there is space again.
import assert from 'node:assert/strict'
import { readFileSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { count, getMany, simpleConfig, waitFor } from '../helpers.js'
import { fill, mountTmpfs } from '../tmpfs.js'
import { backends, send, startAdminLb } from './util.js'

const CFG = '/v2/services/lb/configuration'
const TX = '/v2/services/lb/transactions'

test('config API on a full disk: 507 naming ENOSPC and the state file, nothing left behind, nothing changed; a transaction stays open', async (t) => {
  const disk = mountTmpfs(t, 64)
  if (disk === null) return
  const state = join(disk, 'config-api.json')
  const [b1, b2] = await backends(2)
  const a = await startAdminLb(simpleConfig([b1!.address]), { admin: `state_file = "${state}"` })
  t.after(async () => { await a.lb.stop(); await b1!.close(); await b2!.close() })
  const call = (method: string, path: string, body?: unknown): ReturnType<typeof send> => send(method, `${a.admin}${path}`, body)
  const version = async (): Promise<string> => (await call('GET', `${CFG}/version`)).body.trim()

  let r = await call('POST', `${CFG}/backends`, { name: 'api', balance: { algorithm: 'roundrobin' } })
  assert.equal(r.status, 201, r.body)
  const written = readFileSync(state)
  fill(disk)

  const refusal = `cannot write ${state} (ENOSPC, no space left on the device): the file is unchanged; the configuration was not changed`
  r = await call('POST', `${CFG}/backends`, { name: 'more', balance: { algorithm: 'roundrobin' } })
  assert.equal(r.status, 507, r.body)
  assert.deepEqual(r.json, { code: 507, message: refusal })
  assert.equal(r.headers['configuration-version'], '2')
  assert.deepEqual(readdirSync(disk).sort(), ['config-api.json', 'filler'], 'no temp file left')
  assert.deepEqual(readFileSync(state), written, 'the state file as it was')
  assert.equal(await version(), '2')
  assert.equal((await call('GET', `${CFG}/backends/more`)).status, 404, 'the refused backend does not exist')
  assert.equal((await call('GET', `${CFG}/backends/api`)).status, 200, 'the one written before is still there')

  // a transaction adding a server: its commit is refused the same way and it stays open
  r = await call('POST', `${TX}?version=2`)
  assert.equal(r.status, 201, r.body)
  const id = (r.json as { id: string }).id
  r = await call('POST', `${CFG}/servers?backend=web&transaction_id=${id}`, { name: 's2', address: '127.0.0.1', port: b2!.port, check: 'disabled' })
  assert.equal(r.status, 202, r.body)
  r = await call('PUT', `${TX}/${id}`)
  assert.equal(r.status, 507, r.body)
  assert.deepEqual(r.json, { code: 507, message: `transaction ${id} was not committed, nothing was applied; it stays open: ${refusal}` })
  assert.deepEqual((await call('GET', `${TX}/${id}`)).json, { id, _version: 2, status: 'in_progress' })
  assert.deepEqual(readdirSync(disk).sort(), ['config-api.json', 'filler'])
  assert.deepEqual(count(await getMany(a.lb.url, 4)), { b1: 4 }, 'traffic as before')

  // space again: the same transaction commits
  rmSync(join(disk, 'filler'))
  r = await call('PUT', `${TX}/${id}`)
  assert.equal(r.status, 200, r.body)
  assert.equal(await version(), '3')
  assert.equal((JSON.parse(readFileSync(state, 'utf8')) as { version: number }).version, 3)
  await waitFor(async () => count(await getMany(a.lb.url, 4)).b2 !== undefined, 'traffic to the server the transaction added')
})
