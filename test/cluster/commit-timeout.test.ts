// A config API write whose compare-and-set Redis ran but answered too late
// (max_wait): the answer is 503 saying the write may have been stored, not
// that nothing changed, because it was: once Redis's answers flow again, the
// node takes the write from Redis. Between the node and a real redis-server,
// a proxy that holds Redis's answers on cue.
import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { startBackend } from '../helpers.js'
import { send } from '../admin/util.js'
import { redisBinary, startRedis } from './redis.js'
import { startNode, until } from './nodes.js'

const CFG = '/v2/services/lb/configuration'

/** Forwards to Redis; from the first client bytes that contain `cue` on, Redis's answers wait until release(). */
async function holdingProxy (redisPort: number, cue: string): Promise<{ port: number, release: () => void, close: () => Promise<void> }> {
  let holding = false
  const flushes: Array<() => void> = []
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const up = net.connect(redisPort, '127.0.0.1')
    const held: Buffer[] = []
    const flush = (): void => { for (const d of held.splice(0)) client.write(d) }
    flushes.push(flush)
    for (const s of [client, up]) {
      sockets.add(s)
      s.on('error', () => {})
      s.on('close', () => { client.destroy(); up.destroy() })
    }
    client.on('data', (d: Buffer) => {
      if (d.includes(cue)) holding = true
      up.write(d)
    })
    up.on('data', (d: Buffer) => {
      if (holding) held.push(d)
      else client.write(d)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    release: () => {
      holding = false
      for (const f of flushes) f()
    },
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

test('a write Redis answers too late gets 503 "may have been stored", and the node applies it once Redis answers', async (t) => {
  const redis = await startRedis(redisBinary())
  const backend = await startBackend('web')
  const proxy = await holdingProxy(redis.port, 'late-backend')
  const a = await startNode(backend, `redis://127.0.0.1:${proxy.port}`, 'a')
  t.after(async () => { await a.lb.stop(); await proxy.close(); await backend.close(); await redis.stop() })
  // a first write: Redis then knows the compare-and-set script, which the held write runs by its SHA
  assert.equal((await send('POST', `${a.admin}${CFG}/backends`, { name: 'first' })).status, 201)
  const before = Number((await send('GET', `${a.admin}${CFG}/version`)).body)

  const r = await send('POST', `${a.admin}${CFG}/backends`, { name: 'late-backend' })
  assert.equal(r.status, 503, r.body)
  assert.match((r.json as { message: string }).message, /did not answer the write in time .*it may have been stored all the same/)
  // it was: Redis ran the compare-and-set
  assert.equal(await redis.client().hget('lb:config', 'version'), String(before + 1))
  proxy.release()
  await until('the write on the node that answered 503', async () => (await send('GET', `${a.admin}${CFG}/backends/late-backend`)).status === 200, 5000)
  assert.equal(Number((await send('GET', `${a.admin}${CFG}/version`)).body), before + 1)
})
