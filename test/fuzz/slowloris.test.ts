// Slowloris: 500 connections that each send their request head one byte per
// second must not stop a normal client. A head that is not complete after
// timeouts.header (30 s) is closed, with no 408 (README "Known limits");
// test/e2e/slow-header.test.ts waits for a short one, this test checks the
// first seconds at the default: nothing answered, closed or forwarded.
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import net from 'node:net'
import { test } from 'node:test'
import { request, simpleConfig, sleep, startBackend, startLb } from '../helpers.js'

const SLOW = 500

test('500 slowloris connections do not stop a normal client, and none is answered, closed or forwarded in its first 5 s', async (t) => {
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
    await sleep(50) // the normal client's pacing
  }
  assert.ok(slow.every((c) => c.opened > 0), 'every slow connection was accepted')
  assert.ok(statuses.length >= 20 && statuses.every((s) => s === 200), `every normal request answered 200 within 2 s: ${statuses.join(',')}`)

  // timeouts.header is 30 s by default (closing after 26-30 s on uWS's 4 s tick): nothing shorter cuts a slow head
  assert.deepEqual(slow.filter((c) => c.closedAfter >= 0 || c.answered !== '').map((c) => c.closedAfter), [], 'slow connections closed or answered within 5 s')
  assert.equal(b.requests.filter((r) => r.url === '/slow').length, 0)
})
