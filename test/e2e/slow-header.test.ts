// A client that sends its request head too slowly, or nothing, and an idle
// client keep-alive connection: each is closed after its setting,
// timeouts.header (HAProxy `timeout http-request`, nginx
// client_header_timeout) and timeouts.client_keep_alive (nginx
// keepalive_timeout), by uWS's own timers, which check them on a 4-second
// tick: a setting of 8 s closes after 4-8 s, 20 s after 16-20 s. Bytes that do
// not end a head do not extend it. No 408 is written: uWS closes these
// connections itself and gives lb no hook at that moment (README, "Known
// limits"). What lb must keep: hundreds of such clients do not slow a normal
// client, and nothing of theirs is forwarded.
import assert from 'node:assert/strict'
import http from 'node:http'
import net from 'node:net'
import { test } from 'node:test'
import { reloadApplied, request, simpleConfig, sleep, startBackend, startLb } from '../helpers.js'

/** The windows of an 8 s and a 20 s setting on uWS's 4 s tick, with slack for a loaded machine. */
const HEADER_MS: readonly [number, number] = [3_500, 11_000]
const KEEP_ALIVE_MS: readonly [number, number] = [15_500, 23_000]

interface Watched { name: string, from: number, closedAfter: number, answer: string }

function watch (s: net.Socket, name: string, list: Watched[], from = Date.now()): Watched {
  const w: Watched = { name, from, closedAfter: -1, answer: '' }
  s.on('data', (d: Buffer) => { w.answer += d.toString('latin1') })
  s.on('error', () => {})
  s.on('close', () => { w.closedAfter = Date.now() - w.from })
  list.push(w)
  return w
}

const timeouts = (header: string, keepAlive = '20s'): string => `[timeouts]\nheader = "${header}"\nclient_keep_alive = "${keepAlive}"\n`

test('slowloris and a silent connection are closed after timeouts.header, an idle keep-alive connection after timeouts.client_keep_alive, without an answer; a normal client is served throughout', async (t) => {
  const b = await startBackend('a')
  const lb = await startLb(timeouts('8s') + simpleConfig([b.address]))
  const socks: net.Socket[] = []
  t.after(async () => { for (const s of socks) s.destroy(); await lb.stop(); await b.close() })
  const watched: Watched[] = []

  // an idle keep-alive connection: one request answered, then nothing
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.after(() => agent.destroy())
  const keepAlive = await new Promise<net.Socket>((resolve) => {
    const req = http.get(`${lb.url}/ka`, { agent }, (r) => { r.resume(); r.on('end', () => resolve(req.socket!)) })
  })
  watch(keepAlive, 'idle keep-alive', watched)
  // a connection that sends nothing
  const silent = net.connect(lb.port, '127.0.0.1')
  socks.push(silent)
  watch(silent, 'silent', watched)
  // 300 clients that send one more header line every second: the head never ends
  for (let i = 0; i < 300; i++) {
    const s = net.connect(lb.port, '127.0.0.1', () => s.write('GET /slow HTTP/1.1\r\nHost: x\r\n'))
    socks.push(s)
    watch(s, 'dripping', watched)
  }
  const drip = setInterval(() => { for (const s of socks) if (!s.destroyed && s !== silent) s.write('X-a: b\r\n') }, 1_000)
  t.after(() => clearInterval(drip))

  // a normal client, one request a second, answered at once while the others wait
  const started = Date.now()
  while (watched.some((w) => w.closedAfter < 0) && Date.now() - started < KEEP_ALIVE_MS[1] + 5_000) {
    const t0 = Date.now()
    assert.equal((await request(`${lb.url}/`)).status, 200)
    assert.ok(Date.now() - t0 < 1_000, `a normal request took ${Date.now() - t0} ms`)
    await sleep(1_000) // the normal client's pacing: one request a second while the slow ones wait
  }
  const by = (name: string): number[] => watched.filter((w) => w.name === name).map((w) => w.closedAfter).sort((x, y) => x - y)
  for (const [name, window] of [['silent', HEADER_MS], ['dripping', HEADER_MS], ['idle keep-alive', KEEP_ALIVE_MS]] as const) {
    const times = by(name)
    t.diagnostic(`${name}: closed after ${times[0]}..${times.at(-1)} ms`)
    assert.ok(times[0]! >= window[0] && times.at(-1)! <= window[1], `${name} closed after ${times[0]}..${times.at(-1)} ms, not within ${window.join('..')}`)
  }
  assert.deepEqual(watched.filter((w) => w.answer !== '').map((w) => w.name), [], 'no answer is written to a connection without a complete head (uWS)')
  assert.equal(b.requests.filter((r) => r.url === '/slow').length, 0)
  assert.equal(b.requests.filter((r) => r.url === '/ka').length, 1)
})

test('a reload changes timeouts.header for the connections that open after it', async (t) => {
  const b = await startBackend('a')
  const lb = await startLb(timeouts('60s') + simpleConfig([b.address]))
  const socks: net.Socket[] = []
  t.after(async () => { for (const s of socks) s.destroy(); await lb.stop(); await b.close() })
  lb.write(timeouts('8s') + simpleConfig([b.address]))
  await reloadApplied(lb)
  const watched: Watched[] = []
  const silent = net.connect(lb.port, '127.0.0.1')
  socks.push(silent)
  const w = watch(silent, 'silent after the reload', watched)
  const started = Date.now()
  while (w.closedAfter < 0 && Date.now() - started < HEADER_MS[1] + 5_000) await sleep(100) // polls the close, which comes by itself
  assert.ok(w.closedAfter >= HEADER_MS[0] && w.closedAfter <= HEADER_MS[1], `closed after ${w.closedAfter} ms, not within ${HEADER_MS.join('..')} (60 s before the reload)`)
  assert.equal(w.answer, '')
})
