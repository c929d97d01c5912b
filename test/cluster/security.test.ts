// Cluster mode against a Redis as it runs on another host: TLS (rediss://
// with a private CA), an ACL user whose password comes from a file, never
// logged; a wrong password is one clear log line and the node serves on; and
// a Redis that stops answering (DEBUG SLEEP) holds no request of the data plane.
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type AdminLb, sock } from '../admin/util.js'
import { type Backend, freePort, request, startBackend } from '../helpers.js'
import { type Certs, makeCerts } from '../tls/certs.js'
import { startNode, until } from './nodes.js'
import { type RedisServer, redisBinary, startRedis } from './redis.js'

const PASSWORD = 's3cret-never-logged'

describe('cluster security', () => {
  let redis: RedisServer | null = null
  let certs: Certs
  let backend: Backend
  let tlsUrl = ''
  const nodes: AdminLb[] = []

  before(async () => {
    const bin = redisBinary()
    certs = makeCerts()
    const tlsPort = await freePort()
    redis = await startRedis(bin, undefined, [
      '--tls-port', String(tlsPort), '--tls-cert-file', certs.server.cert, '--tls-key-file', certs.server.key,
      '--tls-ca-cert-file', certs.ca, '--tls-auth-clients', 'no',
      '--user', 'lbnode', 'on', `>${PASSWORD}`, '~*', '&*', '+@all',
      '--enable-debug-command', 'local',
    ])
    tlsUrl = `rediss://127.0.0.1:${tlsPort}`
    writeFileSync(join(certs.dir, 'right.pw'), PASSWORD + '\n')
    writeFileSync(join(certs.dir, 'wrong.pw'), 'not-the-password\n')
    backend = await startBackend('web')
  })
  after(async () => {
    for (const n of nodes) await n.lb.stop()
    await backend?.close()
    await redis?.stop()
  })

  const credentials = (file: string): string => `username = "lbnode"\npassword_file = "${join(certs.dir, file)}"\nca_file = "${certs.ca}"\n`

  test('TLS with a private CA and an ACL user: the node joins, and its password is in no log line', async () => {
    const a = await startNode(backend, tlsUrl, 'a', { cluster: credentials('right.pw') })
    nodes.push(a)
    await until('Redis up on a', async () => /^Redis_up: 1$/m.test(await sock(a.sock, 'show cluster')))
    // the TLS port speaks only TLS, and the connections are the ACL user's
    const clients = String(await redis!.client().call('CLIENT', 'LIST'))
    assert.match(clients, /\buser=lbnode\b/)
    assert.ok(!a.lb.log().includes(PASSWORD), 'the password appears in the log')
  })

  test('a wrong password: one clear log line without the password, Redis_up 0, the data plane serves', async () => {
    const b = await startNode(backend, tlsUrl, 'b', { cluster: credentials('wrong.pw') })
    nodes.push(b)
    await b.lb.logMatching(/cluster: Redis unreachable/)
    assert.match(await sock(b.sock, 'show cluster'), /^Redis_up: 0$/m)
    const line = b.lb.log().split('\n').find((l) => l.includes('cluster: Redis unreachable'))!
    assert.match(line, /WRONGPASS|NOAUTH|invalid username-password/i, line)
    assert.ok(!b.lb.log().includes('not-the-password'), 'the wrong password appears in the log')
    assert.equal((await request(`${b.lb.url}/limited`)).status, 200)
  })

  test('a Redis that stops answering holds no request: all are answered while it sleeps', async () => {
    const a = nodes[0]!
    let redisBack = false
    // DEBUG SLEEP blocks the whole server, every connection, for 3 s
    const sleeping = redis!.client().call('DEBUG', 'SLEEP', '3').then(() => { redisBack = true })
    const answers = await Promise.all(Array.from({ length: 30 }, () => request(`${a.lb.url}/limited`).then((r) => ({ status: r.status, whileAsleep: !redisBack }))))
    await sleeping
    assert.deepEqual(answers.filter((x) => x.status !== 200 && x.status !== 429), [], 'every request answered 200 or 429')
    assert.ok(answers.every((x) => x.whileAsleep), 'a request waited for Redis to wake up')
  })
})
