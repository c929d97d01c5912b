// Transactions of the config API (Data Plane API v2 /transactions) against the
// real balancer: staged writes are answered 202 and change nothing until the
// commit, reads through a transaction see its configuration, a commit applies
// every change as one version (traffic reaches the new servers), an outdated
// transaction is refused with 406, one that does not validate fails whole,
// delete, the open-transaction cap (429), unknown ids (404), and kill -9 around
// a commit leaves all of it or none.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { count, getMany, simpleConfig, sleep } from '../helpers.js'
import { type AdminLb, backends, restartLb, send, startAdminLb } from './util.js'

const CFG = '/v2/services/lb/configuration'
const TX = '/v2/services/lb/transactions'

interface TxModel { id: string, _version: number, status: string }
interface Err { code: number, message: string }

const server = (name: string, port: number): Record<string, unknown> => ({ name, address: '127.0.0.1', port, check: 'disabled' })
const names = (r: { json: unknown }): string[] => (r.json as { data: Array<{ name: string }> }).data.map((x) => x.name)

test('transactions: staged writes, one-version commit, outdated 406, failed commit, delete, 429, 404', async (t) => {
  const [b1, b2, b3, b4] = await backends(4)
  // room for 4 servers: a transaction that adds a fifth does not fit and must fail whole at commit
  const a = await startAdminLb(simpleConfig([b1!.address], '', '[limits]\nservers = 4'), { admin: 'max_open_transactions = 3' })
  t.after(async () => { await a.lb.stop(); for (const b of [b1, b2, b3, b4]) await b!.close() })
  const call = (method: string, path: string, body?: unknown): ReturnType<typeof send> => send(method, `${a.admin}${path}`, body)
  const version = async (): Promise<number> => Number((await call('GET', `${CFG}/version`)).body)
  const start = async (): Promise<string> => {
    const r = await call('POST', `${TX}?version=${await version()}`)
    assert.equal(r.status, 201, r.body)
    return (r.json as TxModel).id
  }

  // start: 201 {id, _version, status}
  let r = await call('POST', `${TX}?version=1`)
  assert.equal(r.status, 201, r.body)
  const tx = r.json as TxModel
  assert.match(tx.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
  assert.deepEqual(tx, { id: tx.id, _version: 1, status: 'in_progress' })

  // three changes staged: each 202, nothing applied yet
  r = await call('POST', `${CFG}/servers?backend=web&transaction_id=${tx.id}`, server('s2', b2!.port))
  assert.equal(r.status, 202, r.body)
  assert.deepEqual(r.json, { name: 's2', address: '127.0.0.1', port: b2!.port, weight: 1, check: 'disabled', maintenance: 'disabled' })
  r = await call('POST', `${CFG}/servers?backend=web&transaction_id=${tx.id}`, server('s3', b3!.port))
  assert.equal(r.status, 202, r.body)
  r = await call('PUT', `${CFG}/servers/s1?backend=web&transaction_id=${tx.id}`, { ...server('s1', b1!.port), maintenance: 'enabled' })
  assert.equal(r.status, 202, r.body)
  // a staged change that cannot apply to the transaction's configuration is refused at once and not recorded
  r = await call('POST', `${CFG}/servers?backend=nope&transaction_id=${tx.id}`, server('s9', b4!.port))
  assert.equal(r.status, 404, r.body)
  r = await call('POST', `${CFG}/servers?backend=web&transaction_id=${tx.id}`, server('s2', b4!.port))
  assert.equal(r.status, 409, r.body)
  assert.equal(await version(), 1, 'staged writes do not change the version')
  assert.deepEqual(count(await getMany(a.lb.url, 6)), { b1: 6 }, 'nor the traffic')
  assert.deepEqual(names(await call('GET', `${CFG}/servers?backend=web`)), ['s1'])
  // reads through the transaction see its configuration
  r = await call('GET', `${CFG}/servers?backend=web&transaction_id=${tx.id}`)
  assert.equal(r.status, 200, r.body)
  assert.deepEqual(names(r), ['s1', 's2', 's3'])
  assert.equal((r.json as { _version: number })._version, 1)
  r = await call('GET', `${CFG}/servers/s1?backend=web&transaction_id=${tx.id}`)
  assert.equal((r.json as { data: { maintenance: string } }).data.maintenance, 'enabled')
  // list and one
  r = await call('GET', TX)
  assert.deepEqual(r.json, [{ id: tx.id, _version: 1, status: 'in_progress' }])
  r = await call('GET', `${TX}/${tx.id}`)
  assert.deepEqual(r.json, { id: tx.id, _version: 1, status: 'in_progress' })

  // commit: 200, all three as one version step, and traffic reaches the new servers only
  r = await call('PUT', `${TX}/${tx.id}`)
  assert.equal(r.status, 200, r.body)
  assert.deepEqual(r.json, { id: tx.id, _version: 2, status: 'success' })
  assert.equal(r.headers['configuration-version'], '2')
  assert.equal(await version(), 2, 'exactly one version step')
  const state = JSON.parse(readFileSync(join(a.lb.dir, 'run', 'config-api.json'), 'utf8')) as { version: number }
  assert.equal(state.version, 2)
  assert.deepEqual(count(await getMany(a.lb.url, 8)), { b2: 4, b3: 4 })
  // a committed transaction is gone: unknown ids are 404 on every /transactions/{id} route
  for (const m of ['GET', 'PUT', 'DELETE']) {
    r = await call(m, `${TX}/${tx.id}`)
    assert.equal(r.status, 404, `${m}: ${r.body}`)
    assert.deepEqual(r.json, { code: 404, message: `missing object: transaction ${tx.id} does not exist` })
  }
  // writes with an unknown transaction: 400 as client-native's "transaction does not exist"
  r = await call('DELETE', `${CFG}/servers/s2?backend=web&transaction_id=${tx.id}`)
  assert.deepEqual([r.status, r.json], [400, { code: 400, message: `transaction does not exist: transaction ${tx.id} does not exist` }])

  // outdated: two transactions on version 2; the second to commit is refused with 406 and nothing of it applies
  const older = await start()
  const newer = await start()
  assert.equal((await call('DELETE', `${CFG}/servers/s2?backend=web&transaction_id=${older}`)).status, 202)
  assert.equal((await call('POST', `${CFG}/servers?backend=web&transaction_id=${newer}`, server('s4', b4!.port))).status, 202)
  assert.equal((await call('PUT', `${TX}/${newer}`)).status, 200)
  const outdated = { code: 406, message: `transaction ${older} is outdated: it was opened on version 2, the configuration is at version 3; nothing was applied, start a new transaction` }
  // a read through it would show version 3's servers as version 2's: refused as its commit is
  r = await call('GET', `${CFG}/servers?backend=web&transaction_id=${older}`)
  assert.deepEqual([r.status, r.json], [406, outdated])
  r = await call('PUT', `${TX}/${older}`)
  assert.equal(r.status, 406, r.body)
  assert.deepEqual(r.json, outdated)
  assert.equal(await version(), 3)
  assert.deepEqual(names(await call('GET', `${CFG}/servers?backend=web`)), ['s1', 's2', 's3', 's4'], 's2 was not deleted')
  assert.deepEqual((await call('GET', `${TX}/${older}`)).json, { id: older, _version: 2, status: 'outdated' })
  assert.equal((await call('PUT', `${TX}/${older}`)).status, 406, 'still refused')
  // a write with an old version outside a transaction is still a 409
  assert.equal((await call('POST', `${TX}?version=2`)).status, 409)

  // a transaction that does not validate as a whole fails at commit, whole: a valid backend and a fifth server (limits.servers = 4)
  const tooBig = await start()
  assert.equal((await call('POST', `${CFG}/backends?transaction_id=${tooBig}`, { name: 'extra' })).status, 202)
  r = await call('POST', `${CFG}/servers?backend=web&transaction_id=${tooBig}`, server('s5', b4!.port))
  assert.equal(r.status, 202, 'staged: the whole is validated at commit')
  r = await call('GET', `${CFG}/backends?transaction_id=${tooBig}`)
  assert.equal(r.status, 400, 'its view says why its commit would fail')
  assert.match((r.json as Err).message, /limits\.servers/)
  r = await call('PUT', `${TX}/${tooBig}`)
  assert.equal(r.status, 400, r.body)
  assert.match((r.json as Err).message, new RegExp(`^transaction ${tooBig} failed, nothing was applied: validation error: limits\\.servers: at most 4 servers \\(limits\\.servers = 4\\)`))
  assert.equal(await version(), 3)
  assert.deepEqual(names(await call('GET', `${CFG}/backends`)), ['web'], 'the valid change of a failed transaction is not applied either')
  assert.deepEqual((await call('GET', `${TX}/${tooBig}`)).json, { id: tooBig, _version: 3, status: 'failed' })
  assert.equal((await call('PUT', `${TX}/${tooBig}`)).status, 400, 'a failed transaction cannot be committed again')
  // the same with a change the configuration cannot take (its router uses the backend)
  const broken = await start()
  assert.equal((await call('POST', `${CFG}/backends?transaction_id=${broken}`, { name: 'other' })).status, 202)
  assert.equal((await call('DELETE', `${CFG}/backends/web?transaction_id=${broken}`)).status, 202)
  r = await call('PUT', `${TX}/${broken}`)
  assert.equal(r.status, 400, r.body)
  assert.match((r.json as Err).message, /validation error: .*unknown service "web"/)
  assert.equal(await version(), 3)
  assert.deepEqual(Object.keys(count(await getMany(a.lb.url, 9))).sort(), ['b2', 'b3', 'b4'], 'traffic as before')
  r = await call('GET', `${TX}?status=failed`)
  assert.deepEqual((r.json as TxModel[]).map((x) => x.id).sort(), [tooBig, broken].sort())

  // delete: 204, nothing of it applied, its id is gone
  const dropped = await start()
  assert.equal((await call('DELETE', `${CFG}/servers/s3?backend=web&transaction_id=${dropped}`)).status, 202)
  r = await call('DELETE', `${TX}/${dropped}`)
  assert.equal(r.status, 204, r.body)
  assert.equal((await call('GET', `${TX}/${dropped}`)).status, 404)
  assert.equal((await call('GET', `${CFG}/servers?backend=web&transaction_id=${dropped}`)).status, 400)
  assert.deepEqual(names(await call('GET', `${CFG}/servers?backend=web`)), ['s1', 's2', 's3', 's4'])
  assert.equal(await version(), 3)

  // the cap: 3 in progress (finished ones do not count), a fourth is 429 until one is deleted
  const open = [await start(), await start(), await start()]
  r = await call('POST', `${TX}?version=3`)
  assert.equal(r.status, 429, r.body)
  assert.deepEqual(r.json, { code: 429, message: 'Too many open transactions: 3 are in progress, the limit is 3 ([admin] max_open_transactions); commit or delete one first' })
  assert.equal((await call('DELETE', `${TX}/${open[0]!}`)).status, 204)
  assert.equal((await call('POST', `${TX}?version=3`)).status, 201)

  // bad starts and mixed parameters
  assert.equal((await call('POST', TX)).status, 422, 'version is required')
  assert.equal((await call('POST', `${CFG}/backends?version=3&transaction_id=${open[1]!}`, { name: 'x' })).status, 400)
  assert.equal((await call('GET', `/v2/services/lb/runtime/servers?backend=web&transaction_id=${open[1]!}`)).status, 400, 'runtime has no transactions')
  // the Data Plane API's own prefix answers too
  r = await send('GET', `${a.admin}/v2/services/haproxy/transactions/${open[1]!}`)
  assert.equal(r.status, 200)
})

test('a transaction stages at most max_transaction_changes; names are at most 255 characters', async (t) => {
  const [b1, b2, b3] = await backends(3)
  const a = await startAdminLb(simpleConfig([b1!.address]), { admin: 'max_transaction_changes = 2' })
  t.after(async () => { await a.lb.stop(); for (const b of [b1, b2, b3]) await b!.close() })
  const call = (method: string, path: string, body?: unknown): ReturnType<typeof send> => send(method, `${a.admin}${path}`, body)
  const id = ((await call('POST', `${TX}?version=1`)).json as TxModel).id
  for (const [name, b] of [['s2', b2], ['s3', b3]] as const) {
    assert.equal((await call('POST', `${CFG}/servers?backend=web&transaction_id=${id}`, server(name, b!.port))).status, 202)
  }
  const over = await call('POST', `${CFG}/servers?backend=web&transaction_id=${id}`, server('s4', b3!.port))
  assert.equal(over.status, 400, over.body)
  assert.match((over.json as Err).message, /holds 2 changes, the most one may \(\[admin\] max_transaction_changes\): commit it and start another/)
  assert.equal((await call('PUT', `${TX}/${id}`)).status, 200, 'what it holds commits')
  assert.deepEqual(names(await call('GET', `${CFG}/servers?backend=web`)), ['s1', 's2', 's3'])
  const long = await call('POST', `${CFG}/backends?version=2`, { name: 'b'.repeat(256) })
  assert.ok(long.status >= 400 && long.status < 500, long.body)
  assert.match((long.json as Err).message, /name in body should be at most 255 characters long/)
})

test('transactions: kill -9 during or after a commit leaves all of it or none', async (t) => {
  const [b1] = await backends(1)
  let a: AdminLb = await startAdminLb(simpleConfig([b1!.address]))
  t.after(async () => { await a.lb.stop('SIGKILL'); await b1!.close() })
  const stateOf = (): { version: number, backends: Record<string, unknown> } => {
    try {
      return JSON.parse(readFileSync(join(a.lb.dir, 'run', 'config-api.json'), 'utf8'))
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, backends: {} } // no write yet
      throw err
    }
  }
  const outcomes = { all: 0, none: 0 }
  // first a commit answered before the kill, timed; then kills at 0, 1/4, 1/2, 3/4 and 1 of that time after sending one
  let took = 0
  for (const share of [-1, 0, 0.25, 0.5, 0.75, 1]) {
    const delay = share < 0 ? -1 : Math.round(share * took)
    const v = Number((await send('GET', `${a.admin}${CFG}/version`)).body)
    const r = await send('POST', `${a.admin}${TX}?version=${v}`)
    const id = (r.json as TxModel).id
    const made = ['a', 'b', 'c'].map((x) => `k${v}${x}`)
    for (const name of made) assert.equal((await send('POST', `${a.admin}${CFG}/backends?transaction_id=${id}`, { name })).status, 202)
    const sent = Date.now()
    const commit = send('PUT', `${a.admin}${TX}/${id}`).catch(() => null)
    if (delay >= 0) await sleep(delay)
    if (delay < 0) {
      assert.equal((await commit)?.status, 200, 'committed before the kill')
      took = Date.now() - sent
    }
    a.lb.proc.kill('SIGKILL')
    await a.lb.stop('SIGKILL')
    await commit
    const state = stateOf()
    const present = made.filter((n) => n in state.backends)
    if (state.version === v + 1) {
      assert.deepEqual(present, made, `version ${v + 1}: every change of the transaction is there`)
      outcomes.all++
    } else {
      assert.equal(state.version, v, 'no version step without the commit')
      assert.deepEqual(present, [], 'no change of the transaction without its version step')
      assert.equal(delay >= 0, true, 'an answered commit is never lost')
      outcomes.none++
    }
    a = await restartLb(a)
    const got = await send('GET', `${a.admin}${CFG}/backends`)
    const live = new Set(names(got))
    assert.equal(made.filter((n) => live.has(n)).length, present.length, 'after the restart: the same all or nothing')
    assert.equal(Number(got.headers['configuration-version']), state.version)
  }
  t.diagnostic(`outcomes of the kills: ${JSON.stringify(outcomes)}`)
  assert.ok(outcomes.all >= 1, `at least the answered commit survived: ${JSON.stringify(outcomes)}`)
})
