// A Redis that stops answering while a request waits for a lease (#38): the
// request is not held longer than it takes to judge Redis down (`fall` failed
// rounds of `max_wait`), then it is decided as during an outage: on the local
// share (failure_mode = "open"), or 503 (failure_mode = "closed"). A bucket's
// request waits and is decided the same way (one code path).
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { sock } from '../admin/util.js'
import { request } from '../helpers.js'
import { clusterFixture, until } from './nodes.js'

const CLOSED = `[routers.closed]
rule = "PathPrefix(\`/closed\`)"
service = "web"
middlewares = ["rlc"]

[middlewares.rlc]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 100
period = "10s"
scope = "cluster"
failure_mode = "closed"

[routers.bucket]
rule = "PathPrefix(\`/bucket\`)"
service = "web"
middlewares = ["rlb"]

[middlewares.rlb]
type = "rateLimit"
algorithm = "tokenBucket"
average = 100
period = "10s"
burst = 100
scope = "cluster"
`

describe('cluster: a request waiting for a lease when Redis stalls', () => {
  const f = clusterFixture({ names: ['a'], cluster: 'max_wait = "50ms"', extra: CLOSED })

  test('open (a window and a bucket): admitted on the local share once Redis is judged down; closed: 503', async () => {
    const a = f.nodes[0]!
    await until('Redis up', async () => /^Redis_up: 1$/m.test(await sock(a.sock, 'show cluster')))
    f.redis.pause()
    try {
      // new sources, both sent at once: their first request on this node waits for a lease that will not come
      const start = Date.now()
      const timed = async (path: string, from: string): Promise<[number, number]> => {
        const r = await request(`${a.lb.url}${path}`, { localAddress: from })
        return [r.status, Date.now() - start]
      }
      const [[open, openMs], [closed, closedMs], [bucket, bucketMs]] = await Promise.all([
        timed('/limited', '127.0.0.81'), timed('/closed', '127.0.0.82'), timed('/bucket', '127.0.0.83'),
      ])
      console.log(`open: ${open} after ${openMs} ms; closed: ${closed} after ${closedMs} ms; bucket: ${bucket} after ${bucketMs} ms`)
      assert.equal(open, 200)
      assert.equal(closed, 503)
      assert.equal(bucket, 200)
      // both waited for the lease round (Redis was up when they came), about 3 rounds of 50 ms, plus this machine's scheduling
      assert.ok(closedMs >= 50, `the closed request did not wait (${closedMs} ms): it found Redis down already`)
      assert.ok(bucketMs >= 50, `the bucket's request did not wait for a lease (${bucketMs} ms)`)
      assert.ok(Math.max(openMs, closedMs, bucketMs) < 1000, `held ${openMs}, ${closedMs} and ${bucketMs} ms`)
    } finally {
      f.redis.resume()
    }
  })
})
