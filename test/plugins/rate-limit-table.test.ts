// The shared rate table filled past its 102,400 entries through the real
// balancer: 256,000 distinct sources (X-Forwarded-For from a trusted proxy)
// pipelined over keep-alive connections. Every request is answered, nothing
// fails, the newest sources are remembered and the oldest were evicted.
import { strict as assert } from 'node:assert'
import net from 'node:net'
import { after, before, test } from 'node:test'
import { RATE_ENTRIES } from '../../core/shm/layout.js'
import { type Lb, request, startLb } from '../helpers.js'

const SOURCES = 256_000 // 2.5 × the table: every set overflows many times
const PROXY = '127.0.0.30'

/** 10.x.y.z for source i */
function source (i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`
}

/** Pipelines GETs for sources [from, to) on one connection; resolves with the count of each status. */
function pipeline (port: number, from: number, to: number): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const counts: Record<string, number> = {}
    let expected = to - from
    let tail = ''
    const sock = net.connect({ port, host: '127.0.0.1', localAddress: PROXY })
    sock.setEncoding('latin1')
    sock.on('data', (d: string) => {
      const text = tail + d
      const re = /HTTP\/1\.1 (\d{3})/g
      let m: RegExpExecArray | null
      let last = 0
      while ((m = re.exec(text)) !== null) {
        counts[m[1]!] = (counts[m[1]!] ?? 0) + 1
        expected--
        last = re.lastIndex
      }
      tail = text.slice(Math.max(last, text.length - 16))
      if (expected === 0) {
        sock.end()
        resolve(counts)
      }
    })
    sock.on('error', reject)
    // write in batches so neither side buffers the whole run
    let i = from
    const BATCH = 500
    const write = (): void => {
      while (i < to) {
        let chunk = ''
        const end = Math.min(to, i + BATCH)
        for (; i < end; i++) chunk += `GET /full HTTP/1.1\r\nhost: lb\r\nx-forwarded-for: ${source(i)}\r\n\r\n`
        if (!sock.write(chunk)) {
          sock.once('drain', write)
          return
        }
      }
    }
    sock.on('connect', write)
  })
}

let lb: Lb
before(async () => {
  lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.full]
rule = "Path(\`/full\`)"
service = "status"
middlewares = ["one-each"]
[services.status]
kind = "status"
allow = ["127.0.0.0/8"]
[middlewares.one-each]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 1
period = "10s"
trusted_proxies = ["${PROXY}"]
`)
})
after(async () => { await lb.stop() })

test(`${SOURCES} sources through a table of ${RATE_ENTRIES}: all answered, newest remembered, oldest evicted`, async () => {
  const conns = 8
  const per = Math.ceil(SOURCES / conns)
  const results = await Promise.all(Array.from({ length: conns }, (_, c) => pipeline(lb.port, c * per, Math.min(SOURCES, (c + 1) * per))))
  const total: Record<string, number> = {}
  for (const r of results) for (const [k, v] of Object.entries(r)) total[k] = (total[k] ?? 0) + v
  // each source's first request is within its limit of 1: a full table never refuses or fails a new key
  assert.deepEqual(total, { 200: SOURCES })
  const again = async (i: number): Promise<number> =>
    (await request(`${lb.url}/full`, { localAddress: PROXY, headers: { 'x-forwarded-for': source(i) } })).status
  // 200 more sources after the flood are the most recent: the table holds them (their second request is over the limit)
  assert.deepEqual(await pipeline(lb.port, SOURCES, SOURCES + 200), { 200: 200 })
  let remembered = 0
  for (let i = SOURCES; i < SOURCES + 200; i++) if (await again(i) === 429) remembered++
  assert.equal(remembered, 200)
  // the oldest were evicted to make room (the table did not grow): they start over
  let forgotten = 0
  for (let i = 0; i < 200; i++) if (await again(i) === 200) forgotten++
  assert.ok(forgotten >= 195, `only ${forgotten} of the 200 oldest sources were evicted`)
  assert.doesNotMatch(lb.log(), /"level":"error"/)
})
