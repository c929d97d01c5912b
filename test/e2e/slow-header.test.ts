// Issue 30 §4: a client that sends its request head too slowly. This uWS build
// has a fixed idle time-out of about 10 s that also bounds the head, and gives
// JS no handle on a connection before its head is complete, so the connection
// is closed without an answer (no 408) and the time-out cannot be configured
// (README, "Known limits"). What lb must keep: hundreds of such clients do not
// slow a normal client, and each of them is closed in about 10 s.
import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { request, simpleConfig, startBackend, startLb } from '../helpers.js'

test('slowloris: 300 clients trickling a request head are closed after about 10 s while a normal client is served at once', async (t) => {
  const b = await startBackend('a')
  const lb = await startLb(simpleConfig([b.address]))
  t.after(async () => { await lb.stop(); await b.close() })
  const started = Date.now()
  const closedAfter: number[] = []
  const answers: string[] = []
  const slow = Array.from({ length: 300 }, () => new Promise<void>((resolve) => {
    const s = net.connect(lb.port, '127.0.0.1', () => s.write('GET / HTTP/1.1\r\nHost: x\r\n'))
    // one more header line every second: the head never ends
    const drip = setInterval(() => { if (!s.destroyed) s.write('X-a: b\r\n') }, 1_000)
    s.on('data', (d: Buffer) => answers.push(d.toString('latin1')))
    s.on('error', () => {})
    s.on('close', () => { clearInterval(drip); closedAfter.push(Date.now() - started); resolve() })
  }))
  for (let i = 0; i < 5; i++) {
    const t0 = Date.now()
    assert.equal((await request(`${lb.url}/`)).status, 200)
    assert.ok(Date.now() - t0 < 1_000, `a normal request took ${Date.now() - t0} ms`)
  }
  await Promise.all(slow)
  assert.deepEqual(answers, [], 'no answer is written before the head is complete (uWS)')
  closedAfter.sort((x, y) => x - y)
  t.diagnostic(`closed after ${closedAfter[0]} to ${closedAfter[closedAfter.length - 1]} ms`)
  assert.ok(closedAfter[0]! > 7_000 && closedAfter[closedAfter.length - 1]! < 15_000, `closed after ${closedAfter[0]}..${closedAfter[closedAfter.length - 1]} ms`)
})
