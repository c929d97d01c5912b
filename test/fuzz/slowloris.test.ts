// Slowloris: 500 connections that each send their request head one byte per
// second must not stop a normal client, and a head that takes longer than the
// header time-out is closed. uWS closes it, before lb sees a request: this
// build (20.57) closes a connection whose head is not complete about 32 s after
// it opened, however many bytes keep coming, without a 408 (measured: 31.9 s for
// one that sent a byte a second throughout, and for one that stopped after 4);
// it cannot be configured (README "Fuzzing").
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import net from 'node:net'
import { test } from 'node:test'
import { request, simpleConfig, sleep, startBackend, startLb } from '../helpers.js'

const SLOW = 500
/** the header time-out of this uWS build (about 32 s, in 4 s steps) plus slack for a loaded machine */
const HEADER_LIMIT_MS = 40_000

test('500 slowloris connections do not stop a normal client, and each is closed after the header time-out', async (t) => {
  const b = await startBackend('b')
  const lb = await startLb(simpleConfig([b.address]))
  t.after(async () => { await lb.stop(); await b.close(); rmSync(lb.dir, { recursive: true, force: true }) })

  const head = 'GET /slow HTTP/1.1\r\nHost: fuzz.test\r\nX-Slow: ' + 'a'.repeat(64)
  const slow = Array.from({ length: SLOW }, () => {
    const s = net.connect(lb.port, '127.0.0.1')
    const c = { s, opened: 0, closedAfter: -1, answered: '', sent: 0 }
    s.on('connect', () => { c.opened = Date.now(); s.write(head[c.sent++]!) })
    s.on('data', (d: Buffer) => { c.answered += d.toString('latin1') })
    s.on('error', () => undefined)
    s.on('close', () => { c.closedAfter = Date.now() - c.opened })
    return c
  })
  t.after(() => { for (const c of slow) c.s.destroy() })
  const ticker = setInterval(() => {
    for (const c of slow) if (c.closedAfter < 0 && c.opened > 0 && c.sent < head.length) c.s.write(head[c.sent++]!)
  }, 1000)
  t.after(() => clearInterval(ticker))

  // a normal client, one request after another for about 5 s
  const statuses: number[] = []
  for (const end = Date.now() + 5000; Date.now() < end;) {
    const t0 = Date.now()
    const r = await request(`${lb.url}/normal`).catch((e: Error) => ({ status: -1, body: e.message }))
    statuses.push(Date.now() - t0 < 2000 ? r.status : -2)
    await sleep(50)
  }
  assert.ok(slow.every((c) => c.opened > 0), 'every slow connection was accepted')
  assert.ok(statuses.length >= 20 && statuses.every((s) => s === 200), `every normal request answered 200 within 2 s: ${statuses.join(',')}`)

  // the slow heads are never finished: lb must close them
  for (const end = Date.now() + HEADER_LIMIT_MS; Date.now() < end && slow.some((c) => c.closedAfter < 0);) await sleep(100)
  const open = slow.filter((c) => c.closedAfter < 0).length
  assert.equal(open, 0, `slow connections still open ${HEADER_LIMIT_MS} ms after they began, though each kept sending a byte per second`)
  const times = slow.map((c) => c.closedAfter).filter((x) => x >= 0).sort((x, y) => x - y)
  if (times.length > 0) t.diagnostic(`slow connections closed after ${times[0]}..${times.at(-1)} ms; answers seen: ${new Set(slow.map((c) => c.answered.split('\r\n')[0] ?? '')).size}`)
  // with an answer, it is a 408 (never a forwarded request)
  for (const c of slow) if (c.answered !== '') assert.match(c.answered, /^HTTP\/1\.1 408 /)
  assert.equal(b.requests.filter((r) => r.url === '/slow').length, 0)
})
