// rateLimit through the real balancer (2 workers) with real clients: the seed's
// three semantics on the one shared table, exact across workers, sources from
// trusted proxies only.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, request, sleep, startBackend, startLb } from '../helpers.js'
import { burst, mwConfig, oneMiddleware, problems, statuses } from './setup.js'
import { PLUGINS } from '../../plugins/index.js'

describe('rateLimit config validation', () => {
  test('each problem names the key, what was expected and what was found', () => {
    const msg = problems(oneMiddleware('type = "rateLimit"\nalgorithm = "fixedWindow"'))
    assert.match(msg, /middlewares\.m\.algorithm: expected one of "tokenBucket", "leakyBucket", "slidingWindow", found "fixedWindow"/)
    assert.match(problems(oneMiddleware('type = "rateLimit"\nalgorithm = "slidingWindow"')),
      /middlewares\.m\.limit: expected an integer from 1 to 1000000000 \(required\), found nothing/)
    assert.match(problems(oneMiddleware('type = "rateLimit"\nalgorithm = "leakyBucket"\nrate = "10 per second"')),
      /middlewares\.m\.rate: expected a rate like "10r\/s" or "600r\/m", above 0 and at most 1000000r\/s, found "10 per second"/)
    assert.match(problems(oneMiddleware('type = "rateLimit"\naverage = 0')), /middlewares\.m\.average: expected an integer from 1 to 1000000000, found number 0/)
    assert.match(problems(oneMiddleware('type = "rateLimit"\naverage = 5\nnodelay = true')),
      /middlewares\.m\.nodelay: unknown key \(allowed: algorithm, scope, failure_mode, ipv6_subnet, trusted_proxies, depth, average, period, burst\)/)
    assert.match(problems(oneMiddleware('type = "rateLimit"\naverage = 5\ntrusted_proxies = ["10.0.0.0/33"]')),
      /middlewares\.m\.trusted_proxies\[0\]: expected an IPv4 or IPv6 address or CIDR like "10\.0\.0\.0\/8" or "2001:db8::\/32", found "10\.0\.0\.0\/33"/)
    assert.match(problems(oneMiddleware('type = "rateLimit"\nalgorithm = "slidingWindow"\nlimit = 5\nperiod = "2d"')),
      /middlewares\.m\.period: expected a duration of at most "24h", found "2d"/)
    assert.match(problems(oneMiddleware('type = "rateLimit"\naverage = 5\ndepth = 0')), /middlewares\.m\.depth: expected an integer from 1 to 32, found number 0/)
    // every built-in type, as the registry lists them
    const types = [...PLUGINS.keys()].join(', ')
    assert.ok(problems(oneMiddleware('type = "ratelimit"\naverage = 5')).includes(`middlewares.m.type: expected a middleware type (${types}) or a plugin module path or package name, found "ratelimit"`))
  })
})

describe('rateLimit through the balancer', () => {
  let backend: Backend, lb: Lb
  before(async () => {
    backend = await startBackend('web')
    lb = await startLb(mwConfig(backend.address, `
[middlewares.per-source]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 100
period = "10s"

[middlewares.other-window]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 100
period = "10s"

[middlewares.zone]
type = "rateLimit"
algorithm = "leakyBucket"
rate = "1r/s"
burst = 5
nodelay = true

[middlewares.zone-delay]
type = "rateLimit"
algorithm = "leakyBucket"
rate = "2r/s"
burst = 3

[middlewares.tokens]
type = "rateLimit"
average = 1
period = "1s"
burst = 4

[middlewares.behind-proxy]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 3
period = "10s"
trusted_proxies = ["127.0.0.20", "127.0.0.21"]
depth = 2

[middlewares.v6]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 2
period = "10s"
trusted_proxies = ["127.0.0.20"]
`, { '/window': ['per-source'], '/other': ['other-window'], '/zone-delay': ['zone-delay'], '/zone': ['zone'], '/tokens': ['tokens'], '/proxied': ['behind-proxy'], '/v6': ['v6'] }))
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('150 requests within 10 s to a 100-per-10-s limit: exactly 100 accepted and 50 refused, across both workers', async () => {
    // a new connection per request: SO_REUSEPORT spreads them over both workers (150 connections all
    // landing on one worker has probability 2^-149), so the count must hold across threads
    const rs = await burst(`${lb.url}/window`, 150, 16, { localAddress: '127.0.0.11' })
    assert.deepEqual(statuses(rs), { 200: 100, 429: 50 })
    const refused = rs.find((r) => r.status === 429)!
    assert.equal(refused.body, 'Too Many Requests\n')
    assert.equal(refused.headers['content-type'], 'text/plain')
    const retry = Number(refused.headers['retry-after'])
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 20, `Retry-After ${refused.headers['retry-after']}`)
    // another source has its own count; another middleware has its own key space in the same table
    assert.equal((await request(`${lb.url}/window`, { localAddress: '127.0.0.12' })).status, 200)
    assert.equal((await request(`${lb.url}/other`, { localAddress: '127.0.0.11' })).status, 200)
  })

  test('leaky bucket with nodelay (nginx limit_req): burst + 1 pass at once, the next is refused with Retry-After', async () => {
    const rs = await burst(`${lb.url}/zone`, 8, 8, { localAddress: '127.0.0.13' })
    assert.deepEqual(statuses(rs), { 200: 6, 429: 2 })
    assert.equal(rs.find((r) => r.status === 429)!.headers['retry-after'], '1')
  })

  test('leaky bucket without nodelay delays requests within the burst instead of refusing them', async () => {
    const rs = await burst(`${lb.url}/zone-delay`, 6, 6, { localAddress: '127.0.0.14' })
    assert.deepEqual(statuses(rs), { 200: 4, 429: 2 })
  })

  test('token bucket (Traefik rateLimit): a bucket of `burst` tokens, then 429', async () => {
    const rs = await burst(`${lb.url}/tokens`, 6, 6, { localAddress: '127.0.0.15' })
    assert.deepEqual(statuses(rs), { 200: 4, 429: 2 })
    assert.equal(rs.find((r) => r.status === 429)!.headers['retry-after'], '1')
  })

  test('an IPv6 client counts by its /64 (ipv6_subnet): rotating addresses inside it does not escape the limit', async () => {
    const from = async (ip: string): Promise<number> => (await request(`${lb.url}/v6`, { localAddress: '127.0.0.20', headers: { 'x-forwarded-for': ip } })).status
    assert.deepEqual([await from('2001:db8:1:2::1'), await from('2001:db8:1:2::2'), await from('2001:db8:1:2:ffff:1:2:3')], [200, 200, 429])
    assert.equal(await from('2001:db8:1:3::1'), 200, 'another /64 is another client')
    assert.equal(await from('198.51.100.9'), 200, 'IPv4 by its address')
  })

  test('X-Forwarded-For counts only from trusted proxies, and only `depth` hops deep', async () => {
    const url = `${lb.url}/proxied`
    // an untrusted client rotating X-Forwarded-For is still counted by its own address
    const spoof = []
    for (let i = 0; i < 5; i++) spoof.push(await request(url, { localAddress: '127.0.0.16', headers: { 'x-forwarded-for': `203.0.113.${i}` } }))
    assert.deepEqual(statuses(spoof), { 200: 3, 429: 2 })
    // through a trusted proxy, each client behind it has its own count
    const viaProxy = async (xff: string, from = '127.0.0.20'): Promise<number> =>
      (await request(url, { localAddress: from, headers: { 'x-forwarded-for': xff } })).status
    for (let i = 0; i < 3; i++) assert.equal(await viaProxy('198.51.100.1'), 200)
    for (let i = 0; i < 3; i++) assert.equal(await viaProxy('198.51.100.2'), 200)
    assert.equal(await viaProxy('198.51.100.1'), 429)
    // a client prepending its own entries does not escape: the entry the trusted proxy appended counts
    assert.equal(await viaProxy('192.0.2.77, 198.51.100.1'), 429)
    // two trusted hops (depth 2): 127.0.0.21 in the chain is skipped, the client before it counts
    assert.equal(await viaProxy('198.51.100.1, 127.0.0.21'), 429)
    assert.equal(await viaProxy('198.51.100.3, 127.0.0.21'), 200)
    // but not three: past depth, the address reached is the source (a trusted proxy's, here)
    for (let i = 0; i < 3; i++) assert.equal(await viaProxy('198.51.100.4, 127.0.0.21, 127.0.0.21'), 200)
    assert.equal(await viaProxy('198.51.100.5, 127.0.0.21, 127.0.0.21'), 429)
  })

  test('a reload (SIGHUP) keeps the counts of middlewares that keep their name: the table is shared memory', async () => {
    const applied = (): number => (lb.log().match(/"msg":"(configuration applied|reloaded)"/g) ?? []).length
    const n = applied()
    lb.reload()
    for (let i = 0; i < 200 && applied() === n; i++) await sleep(25)
    assert.ok(applied() > n, 'the reload was applied')
    const rs = await burst(`${lb.url}/window`, 3, 1, { localAddress: '127.0.0.11' })
    assert.deepEqual(statuses(rs), { 429: 3 })
  })
})
