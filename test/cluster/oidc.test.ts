// An oidc logout ends the session on every node of a cluster: two real lb
// nodes (2 workers each) on a real redis-server, a real provider
// (oidc-provider). A copy of the session cookie taken before the logout is
// refused on the other node right after it, by a node that was down when it
// happened once it is back, by a node that starts after Redis lost its data
// (the nodes give it back), and, when Redis was down at the logout, by the
// other node once Redis answers again.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type AdminLb, restartLb, startAdminLb } from '../admin/util.js'
import { type Backend, freePort, request } from '../helpers.js'
import { type Idp, Client, echo, everyWorker, secrets, startIdp } from '../plugins/oidc-idp.js'
import { mwConfig } from '../plugins/setup.js'
import { metric, until } from './nodes.js'
import { type RedisServer, redisBinary, startRedis } from './redis.js'

describe('cluster: an oidc logout ends the session on every node', () => {
  let redis: RedisServer, backend: Backend, idp: Idp, issuer: string, secretsToml: string
  const nodes: AdminLb[] = []
  const config = (name: string): string => mwConfig(backend.address, `[middlewares.sso]\ntype = "oidc"\nissuer = "${issuer}"\n${secretsToml}\n`, { '/': ['sso'] }) + `
[cluster]
url = "${redis.url}"
node = "${name}"
node_ttl = "1500ms"
# the default 50 ms is for a real network; these tests are about revocations, not a slow Redis
max_wait = "1s"
`
  const loaded = async (n: AdminLb): Promise<void> => { await everyWorker(`${n.lb.url}/`, 302) }
  before(async () => {
    redis = await startRedis(redisBinary())
    backend = await echo()
    const idpPort = await freePort()
    issuer = `http://127.0.0.1:${idpPort}`
    secretsToml = secrets().toml // one cookie key for every node, as docs/cluster.md says
    for (const name of ['a', 'b']) nodes.push(await startAdminLb(config(name), { socket: false }))
    idp = await startIdp({ lb: nodes[0]!.lb.url, port: idpPort })
    for (const n of nodes) {
      await loaded(n)
      await until('2 live nodes', async () => await metric(n, 'lb_cluster_nodes') === 2)
    }
  })
  after(async () => {
    for (const n of nodes) await n.lb.stop()
    await idp?.close()
    await backend?.close()
    await redis?.stop()
  })

  /** signs `user` in at node a; returns the browser and a copy of its session cookie */
  const login = async (user: string): Promise<{ c: Client, cookie: string }> => {
    const c = new Client()
    const r = await c.signIn(await c.go(`${nodes[0]!.lb.url}/app`), user)
    assert.equal(r.status, 200, r.body)
    return { c, cookie: c.cookie(nodes[0]!.lb.url, '_lb_oidc')! }
  }
  /** the statuses of `n` API requests with the cookie to node `at`, each on a connection of its own (both workers) */
  const statuses = async (at: AdminLb, cookie: string, n = 10): Promise<Set<number>> =>
    new Set(await Promise.all(Array.from({ length: n }, async () =>
      (await request(`${at.lb.url}/app`, { headers: { cookie: `_lb_oidc=${cookie}`, accept: 'application/json' } })).status)))
  const logout = async (c: Client): Promise<void> => {
    const r = await c.fetch(`${nodes[0]!.lb.url}/oauth2/sign_out`)
    assert.equal(r.status, 302)
  }

  let first = ''
  test('a copy of the cookie is refused on the other node, on both its workers, right after the logout', async () => {
    const ann = await login('ann')
    first = ann.cookie
    assert.deepEqual(await statuses(nodes[1]!, ann.cookie), new Set([200]), 'a session of node a is good on node b (one cookie key)')
    await logout(ann.c)
    assert.deepEqual(await statuses(nodes[1]!, ann.cookie), new Set([401]))
    assert.deepEqual(await statuses(nodes[0]!, ann.cookie), new Set([401]))
  })

  test('a node that was down during the logout refuses the session when it comes back', async () => {
    const bob = await login('bob')
    assert.deepEqual(await statuses(nodes[1]!, bob.cookie), new Set([200]))
    await nodes[1]!.lb.stop()
    await logout(bob.c)
    nodes[1] = await restartLb(nodes[1]!, { noWait: false })
    // from its first request on: it read the cluster's revocations before its workers started
    assert.deepEqual(await statuses(nodes[1]!, bob.cookie), new Set([401]))
    await loaded(nodes[1]!)
  })

  test('a logout while Redis is down holds on its node at once, and on the other once Redis is back', async () => {
    await until('2 live nodes', async () => await metric(nodes[0]!, 'lb_cluster_nodes') === 2)
    const cy = await login('cy')
    assert.deepEqual(await statuses(nodes[1]!, cy.cookie), new Set([200]))
    await redis.kill()
    const started = Date.now()
    await logout(cy.c)
    assert.ok(Date.now() - started < 5000, `the logout waited ${Date.now() - started} ms for an unreachable Redis`)
    assert.deepEqual(await statuses(nodes[0]!, cy.cookie), new Set([401]), 'its node refuses it at once')
    await redis.restart() // empty: it lost every revocation, and the nodes give them back
    await until('node b refuses the session', async () => (await statuses(nodes[1]!, cy.cookie, 4)).has(200) === false, 15_000)
    assert.deepEqual(await statuses(nodes[1]!, cy.cookie), new Set([401]))
  })

  test('a node that starts after Redis lost its data refuses the sessions revoked before: the nodes gave them back', async () => {
    const c = redis.client()
    await until('the revocations back in Redis', async () => await c.zcard('lb:revoked') >= 3, 15_000)
    const fresh = await startAdminLb(config('c'), { socket: false }) // a node of its own folder: no revocation file
    nodes.push(fresh)
    assert.deepEqual(await statuses(fresh, first), new Set([401]))
  })
})
