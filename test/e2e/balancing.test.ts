// Balancing through the real balancer with 2 workers: every client request
// opens a new connection, so the kernel spreads them over both workers.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import { after, test } from 'node:test'
import { type Backend, count, getMany, request, simpleConfig, sleep, startBackend, startLb, waitFor } from '../helpers.js'

const backends: Backend[] = []
after(async () => { for (const b of backends) await b.close() })

async function three (): Promise<Backend[]> {
  const bs = [await startBackend('a'), await startBackend('b'), await startBackend('c')]
  backends.push(...bs)
  return bs
}

test('weighted round robin: exact shares over all workers', async (t) => {
  const [a, b, c] = await three()
  const lb = await startLb(simpleConfig([a!.address, b!.address, c!.address]).replace('name = "s1"', 'name = "s1"\nweight = 2'))
  t.after(() => lb.stop())
  const c1 = count(await getMany(lb.url, 400))
  assert.deepEqual(c1, { a: 200, b: 100, c: 100 })
})

test('least connections counts requests in flight on ALL workers', async (t) => {
  const held: http.ServerResponse[] = []
  const slow = await startBackend('slow', (req, res) => { req.resume(); held.push(res) })
  const fast = await startBackend('fast')
  backends.push(slow, fast)
  const lb = await startLb(simpleConfig([slow.address, fast.address], 'balance = "leastconn"'))
  t.after(() => lb.stop())
  // the first request that lands on `slow` stays in flight; from then on every
  // request, whichever worker takes it, must see it and pick `fast`. Each
  // request starts once the previous one has landed (answered, or held).
  const pending: Array<Promise<unknown>> = []
  // "Answered" means the client has the whole response, so the balancer has
  // already counted that request out: a request merely received by `fast` may
  // still be in flight, and a tie with `slow` may then go either way.
  for (let i = 0; i < 30; i++) {
    const heldBefore = held.length
    let settled = false
    pending.push(request(lb.url).then(() => { settled = true }, () => { settled = true }))
    // (up to 10 s: on a slow machine a request that is still in flight when the next one starts makes a tie)
    for (let k = 0; k < 2000 && !settled && held.length === heldBefore; k++) await sleep(5)
  }
  // every request landed: answered by fast, or held by slow
  await waitFor(() => held.length + fast.requests.length >= 30, 'all 30 requests to reach a server', 10_000)
  assert.equal(held.length, 1, `slow got ${held.length} requests`)
  for (const r of held) r.end('slow\n')
  await Promise.all(pending)
  assert.equal(fast.requests.length, 29)
})

test('source hash: a client always reaches the same server, in every worker and after a restart', async (t) => {
  const [a, b, c] = await three()
  const conf = simpleConfig([a!.address, b!.address, c!.address], 'balance = "source"')
  const mapping = async (url: string): Promise<Record<string, string>> => {
    const m: Record<string, string> = {}
    for (let i = 1; i <= 24; i++) {
      const seen = new Set(await getMany(url, 4, { localAddress: `127.0.0.${i}` }))
      assert.equal(seen.size, 1, `client 127.0.0.${i} reached ${[...seen].join(', ')}`)
      m[i] = [...seen][0]!
    }
    return m
  }
  const lb1 = await startLb(conf)
  const first = await mapping(lb1.url)
  await lb1.stop()
  assert.ok(new Set(Object.values(first)).size === 3, 'clients spread over the three servers')
  const lb2 = await startLb(conf)
  t.after(() => lb2.stop())
  assert.deepEqual(await mapping(lb2.url), first)
  // removing a server moves only the clients that were on it
  lb2.write(simpleConfig([a!.address, c!.address], 'balance = "source"').replace('name = "s2"', 'name = "s3"'))
  lb2.reload()
  await lb2.logMatching(/"generation":2/)
  const after = await mapping(lb2.url)
  for (const [k, v] of Object.entries(first)) if (v !== 'b') assert.equal(after[k], v, `client ${k} moved from ${v}`)
})
