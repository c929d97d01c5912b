// The config API's state shared by a cluster through a real redis-server, with
// three real lb nodes: a write on one node is applied on the others within 1 s,
// the version is the cluster's (the same version written on two nodes: one
// success, one 409), and a node started while Redis is down starts from its
// local copy and catches up when Redis is back; a transaction is one cluster-wide step;
// a node's reads show a version only with the configuration it names; a node
// whose state file is set aside takes the cluster's state and wipes nobody's.
import assert from 'node:assert/strict'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { type AdminLb, restartLb, send } from '../admin/util.js'
import { clusterFixture, until } from './nodes.js'

const CFG = '/v2/services/lb/configuration'
const TX = '/v2/services/lb/transactions'

const version = async (n: AdminLb): Promise<number> => Number((await send('GET', `${n.admin}${CFG}/version`)).body.trim())

describe('cluster: the config API state lives in Redis', () => {
  const f = clusterFixture()
  const nodes = f.nodes

  test('a backend written on node a is on b and c within 1 s, with the same version', async () => {
    const [a, b, c] = nodes as [AdminLb, AdminLb, AdminLb]
    const r = await send('POST', `${a.admin}${CFG}/backends?version=1`, { name: 'api1' })
    assert.equal(r.status, 201, r.body)
    const written = Date.now()
    for (const n of [b, c]) {
      await until('api1 on the other node', async () => (await send('GET', `${n.admin}${CFG}/backends/api1`)).status === 200, 1000)
      assert.equal(await version(n), 2)
    }
    assert.ok(Date.now() - written <= 1000, `applied after ${Date.now() - written} ms`)
    await b.lb.logMatching(/configuration of the cluster applied/)
  })

  test('the same version written on two nodes at once: one 201, one 409', async () => {
    const [a, b, c] = nodes as [AdminLb, AdminLb, AdminLb]
    for (const n of nodes) await until('version 2 everywhere', async () => await version(n) === 2)
    const [rb, rc] = await Promise.all([
      send('POST', `${b.admin}${CFG}/backends?version=2`, { name: 'from-b' }),
      send('POST', `${c.admin}${CFG}/backends?version=2`, { name: 'from-c' }),
    ])
    assert.deepEqual([rb.status, rc.status].sort(), [201, 409], `${rb.body} ${rc.body}`)
    const loser = rb.status === 409 ? rb : rc
    assert.match(loser.body, /version mismatch/)
    // the winner's backend, and only it, everywhere at version 3
    const winner = rb.status === 201 ? 'from-b' : 'from-c'
    const other = winner === 'from-b' ? 'from-c' : 'from-b'
    for (const n of [a, b, c]) {
      await until('version 3', async () => await version(n) === 3, 1000)
      assert.equal((await send('GET', `${n.admin}${CFG}/backends/${winner}`)).status, 200)
      assert.equal((await send('GET', `${n.admin}${CFG}/backends/${other}`)).status, 404)
    }
  })

  test('a node started while Redis is down starts from its local copy, refuses writes with 503, catches up when Redis is back', async () => {
    const r = f.redis
    assert.equal(await nodes[2]!.lb.stop(), 0)
    await r.kill()
    const c = await restartLb(nodes[2]!)
    nodes[2] = c
    await c.lb.logMatching(/Redis unreachable/)
    assert.equal(await version(c), 3, 'the local copy')
    assert.equal((await send('GET', `${c.admin}${CFG}/backends/api1`)).status, 200)
    const refused = await send('POST', `${c.admin}${CFG}/backends?version=3`, { name: 'offline' })
    assert.equal(refused.status, 503)
    assert.match(refused.body, /Redis, which does not answer/)
    // Redis back, empty: the nodes put their copy (version 3) back, and writes go on from there
    await r.restart()
    await until('Redis reachable on c', () => /Redis reachable[^\n]*\n(?![\s\S]*Redis unreachable)/.test(c.lb.log().split('Redis unreachable').pop()!), 5000)
    await until('the cluster version back in Redis', async () => (await r.client().hget('lb:config', 'version')) === '3', 3000)
    const w = await send('POST', `${c.admin}${CFG}/backends?version=3`, { name: 'after' })
    assert.equal(w.status, 201, w.body)
    // 3 s, not the 1 s of connected nodes: a's own connections to Redis may still be coming back (ioredis waits up to 1 s between tries)
    await until('the write of c on a', async () => (await send('GET', `${nodes[0]!.admin}${CFG}/backends/after`)).status === 200, 3000)
  })

  test('a transaction of three changes committed on node a applies whole on b and c, as one version; one opened before on b is refused', async () => {
    const [a, b, c] = nodes as [AdminLb, AdminLb, AdminLb]
    const v = await version(a)
    for (const n of nodes) await until('one version everywhere', async () => await version(n) === v)
    const open = async (n: AdminLb): Promise<string> => {
      const r = await send('POST', `${n.admin}${TX}?version=${v}`)
      assert.equal(r.status, 201, r.body)
      return (r.json as { id: string }).id
    }
    const tx = await open(a)
    const stale = await open(b)
    for (const name of ['tx1', 'tx2', 'tx3']) assert.equal((await send('POST', `${a.admin}${CFG}/backends?transaction_id=${tx}`, { name })).status, 202)
    assert.equal((await send('POST', `${b.admin}${CFG}/backends?transaction_id=${stale}`, { name: 'stale1' })).status, 202)
    const r = await send('PUT', `${a.admin}${TX}/${tx}`)
    assert.equal(r.status, 200, r.body)
    assert.equal((r.json as { _version: number })._version, v + 1, 'one version step for three changes')
    for (const n of [b, c]) {
      // whole: the moment one of the three is there, all three are, at one version
      await until('the transaction on the other node', async () => (await send('GET', `${n.admin}${CFG}/backends/tx1`)).status === 200, 1000)
      for (const name of ['tx2', 'tx3']) assert.equal((await send('GET', `${n.admin}${CFG}/backends/${name}`)).status, 200, name)
      assert.equal(await version(n), v + 1)
    }
    // b's transaction was opened on the version before: refused where it is committed, nothing of it applied anywhere
    const s = await send('PUT', `${b.admin}${TX}/${stale}`)
    assert.equal(s.status, 406, s.body)
    for (const n of nodes) {
      assert.equal(await version(n), v + 1)
      assert.equal((await send('GET', `${n.admin}${CFG}/backends/stale1`)).status, 404)
    }
  })

  test('a node never answers a version before the configuration it names: _version and the backends change together', async () => {
    const [a, b, c] = nodes as [AdminLb, AdminLb, AdminLb]
    /** the version each backend was written at */
    const writtenAt = new Map<string, number>()
    const seen: Array<{ node: string, version: number, names: string[] }> = []
    let writing = true
    // reads as fast as the nodes answer, while a writes: the window to catch is a node's apply, a few ms
    const read = async (n: AdminLb, node: string): Promise<void> => {
      while (writing) {
        const r = await send('GET', `${n.admin}${CFG}/backends`)
        const list = r.json as { _version: number, data: Array<{ name: string }> }
        seen.push({ node, version: list._version, names: list.data.map((x) => x.name) })
      }
    }
    const readers = [read(b, 'b'), read(c, 'c')]
    try {
      for (let i = 0; i < 10; i++) {
        const name = `seq${i}`
        const r = await send('POST', `${a.admin}${CFG}/backends`, { name })
        assert.equal(r.status, 201, r.body)
        writtenAt.set(name, Number(r.headers['configuration-version']))
        for (const n of [b, c]) await until(`${name} on the other node`, async () => (await send('GET', `${n.admin}${CFG}/backends/${name}`)).status === 200, 1000)
      }
    } finally {
      writing = false
      await Promise.all(readers)
    }
    const early = seen.filter((x) => [...writtenAt].some(([name, v]) => v <= x.version && !x.names.includes(name)))
    assert.deepEqual(early.map((x) => `${x.node} at version ${x.version} without ${[...writtenAt].filter(([name, v]) => v <= x.version && !x.names.includes(name)).map(([name]) => name).join(', ')}`), [],
      `${seen.length} reads`)
  })

  test('a node whose state file cannot be applied sets it aside and takes the cluster\'s state; the others keep theirs', async () => {
    const [a, b] = nodes as [AdminLb, AdminLb, AdminLb]
    const v = await version(a)
    for (const n of nodes) await until('one version everywhere', async () => await version(n) === v)
    assert.equal(await nodes[2]!.lb.stop(), 0)
    // a state file that reads (its version kept) but does not apply: a backend no configuration accepts
    const file = join(nodes[2]!.lb.dir, 'run', 'config-api.json')
    const state = JSON.parse(readFileSync(file, 'utf8')) as { version: number, backends: Record<string, unknown> }
    assert.equal(state.version, v)
    state.backends.broken = { no_such_setting: true }
    writeFileSync(file, JSON.stringify(state))
    const c = await restartLb(nodes[2]!)
    nodes[2] = c
    await c.lb.logMatching(/config API state file set aside/)
    // before, c put its empty state in Redis as the newest, and a and b took it: every API backend gone
    await until('the cluster\'s state on c', async () => (await send('GET', `${c.admin}${CFG}/backends/api1`)).status === 200, 3000)
    for (const n of [a, b, c]) {
      assert.equal(await version(n), v)
      for (const name of ['api1', 'tx1', 'seq9']) assert.equal((await send('GET', `${n.admin}${CFG}/backends/${name}`)).status, 200, name)
    }
  })
})
