// The seed's limits that other tests do not already show at their default
// values (see README "Fuzzing" for where each limit is tested): a body of
// exactly max_body (100M) is forwarded whole and one byte more is refused
// with 413 before anything is forwarded; an idle client keep-alive connection
// stays usable for its first seconds (timeouts.client_keep_alive, the seed's
// 65 s by default, closes it later: slow-header.test.ts with a short one).
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { test } from 'node:test'
import { simpleConfig, sleep, startBackend, startLb, waitFor } from '../helpers.js'

const MAX_BODY = 100 * 1024 * 1024

test('max_body at its default (100M): exactly 100M is forwarded whole, one byte more gets 413 and nothing is forwarded', async (t) => {
  const b = await startBackend('b')
  const lb = await startLb(simpleConfig([b.address]))
  t.after(async () => { await lb.stop(); await b.close(); rmSync(lb.dir, { recursive: true, force: true }) })
  const chunk = Buffer.alloc(1024 * 1024, 97)
  const status = await new Promise<number>((resolve, reject) => {
    const req = http.request(`${lb.url}/whole`, { method: 'POST', agent: false, headers: { 'content-length': String(MAX_BODY) } }, (r) => { r.resume(); resolve(r.statusCode!) })
    req.on('error', reject)
    let i = 0
    const pump = (): void => { while (i < 100) { i++; if (!req.write(chunk)) { req.once('drain', pump); return } } req.end() }
    pump()
  })
  assert.equal(status, 200)
  await waitFor(() => b.requests.length > 0, 'the backend to see the whole body')
  assert.equal(b.requests.find((r) => r.url === '/whole')?.body, MAX_BODY)

  const over = await new Promise<string>((resolve) => {
    const s = net.connect(lb.port, '127.0.0.1', () => s.write(`POST /over HTTP/1.1\r\nHost: x\r\nContent-Length: ${MAX_BODY + 1}\r\n\r\nabc`))
    s.once('data', (d: Buffer) => { resolve(d.toString('latin1').split('\r\n')[0]!); s.destroy() })
    s.on('error', (e) => resolve(e.message))
  })
  assert.equal(over, 'HTTP/1.1 413 Payload Too Large')
  assert.equal(b.requests.filter((r) => r.url === '/over').length, 0)
})

test('an idle client keep-alive connection stays open and usable for 5 s (timeouts.client_keep_alive closes it later: slow-header.test.ts)', async (t) => {
  const b = await startBackend('b')
  const lb = await startLb(simpleConfig([b.address]))
  t.after(async () => { await lb.stop(); await b.close(); rmSync(lb.dir, { recursive: true, force: true }) })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.after(() => agent.destroy())
  const get = (path: string): Promise<net.Socket> => new Promise((resolve) => {
    const req = http.get(`${lb.url}${path}`, { agent }, (r) => { r.resume(); r.on('end', () => resolve(req.socket!)) })
  })
  const sock = await get('/a')
  let closed = false
  sock.once('close', () => { closed = true })
  await sleep(5_000) // the thing tested: nothing closes the idle connection for 5 s
  assert.equal(closed, false, 'an idle keep-alive connection was closed within 5 s')
  assert.equal(await get('/b'), sock, 'the next request reuses the idle connection')
  assert.deepEqual(b.requests.map((r) => r.url), ['/a', '/b'])
})
