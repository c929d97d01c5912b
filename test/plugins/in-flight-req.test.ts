// inFlightReq (Traefik's): at most `amount` requests of a source in flight at
// once, exact across two workers, through the real balancer in front of a real
// backend that holds its answers until the test lets them go. The count is
// given back however a request ends: answered, or its client gone mid-flight
// (socket destroyed); a source behind a trusted proxy counts on its own.
import { strict as assert } from 'node:assert'
import http from 'node:http'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Reply, request, startBackend, waitFor } from '../helpers.js'
import { type AdminLb, startAdminLb } from '../admin/util.js'
import { mwConfig, oneMiddleware, problems } from './setup.js'

describe('inFlightReq: config validation', () => {
  test('amount is required, from 1', () => {
    assert.match(problems(oneMiddleware('type = "inFlightReq"')), /middlewares\.m\.amount: expected an integer from 1 to 1000000 \(required\)/)
    assert.match(problems(oneMiddleware('type = "inFlightReq"\namount = 2\nsource_criterion = "x"')), /middlewares\.m\.source_criterion: unknown key/)
  })
})

describe('inFlightReq through the balancer', () => {
  let backend: Backend, a: AdminLb
  const held: http.ServerResponse[] = []
  const releaseAll = (): void => { for (const r of held.splice(0)) r.end('done\n') }
  const get = (headers: Record<string, string> = {}): Promise<Reply> => request(`${a.lb.url}/`, { headers })
  const arrived = (n: number): Promise<true> => waitFor(() => held.length >= n || null, `${n} requests at the backend`)

  before(async () => {
    // /probe is answered at once; anything else is held until the test lets it go
    backend = await startBackend('slow', (req, res) => { req.resume(); req.on('end', () => { if (req.url === '/probe') res.end('probe\n'); else held.push(res) }) })
    a = await startAdminLb('[global]\nworkers = 2\naccess_log = "off"\n\n' + mwConfig(backend.address, `
[middlewares.three]
type = "inFlightReq"
amount = 3
trusted_proxies = ["127.0.0.1"]
`, { '/': ['three'] }))
  })
  after(async () => { releaseAll(); await a.lb.stop(); await backend.close() })

  test('three in flight pass (on separate connections, both workers); more get 429 at once; one ending frees a place', async () => {
    const first = [get(), get(), get()]
    await arrived(3)
    const refused = await Promise.all([get(), get()])
    assert.deepEqual(refused.map((r) => r.status), [429, 429])
    assert.match(refused[0]!.body, /too many requests in flight from this source \(at most 3 at once\)/)
    held.shift()!.end('done\n') // whichever arrived first: its request ends
    assert.equal((await Promise.race(first)).status, 200)
    const fourth = get()
    await arrived(3)
    assert.equal((await get()).status, 429)
    releaseAll()
    assert.deepEqual((await Promise.all([...first, fourth])).map((r) => r.status), [200, 200, 200, 200])
  })

  test('another source (behind a trusted proxy) has its own count', async () => {
    const mine = [get(), get(), get()]
    await arrived(3)
    const other = get({ 'x-forwarded-for': '203.0.113.7' })
    await arrived(4)
    assert.equal((await get()).status, 429)
    releaseAll()
    assert.equal((await other).status, 200)
    await Promise.all(mine)
  })

  test('a client gone mid-flight gives its place back', async () => {
    const reqs = Array.from({ length: 3 }, () => http.get(`${a.lb.url}/`, { agent: false }).on('error', () => undefined))
    await arrived(3)
    for (const r of reqs) r.destroy()
    // lb sees the close and ends the three requests: the places come back
    await waitFor(async () => (await request(`${a.lb.url}/probe`)).status === 200 || null, 'a place given back', 5000, 50)
    releaseAll() // the answers to the gone clients go nowhere
    // three fresh requests all pass again
    const again = [get(), get(), get()]
    await arrived(3)
    releaseAll()
    assert.deepEqual((await Promise.all(again)).map((r) => r.status), [200, 200, 200])
  })
})
