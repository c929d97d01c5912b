// SIGTERM with requests still running at the end of drain_timeout.
// Each gets a 503 with Connection: close (or its connection closed when the
// response head was already out), every upstream connection is closed, and
// lb exits 0 (never SIGABRT) after logging how many requests it cut.
import assert from 'node:assert/strict'
import http from 'node:http'
import net from 'node:net'
import { test } from 'node:test'
import { simpleConfig, startLb, waitFor } from '../helpers.js'

/** A GET on a raw socket; resolves with everything received until the connection closed. */
function rawGet (port: number, path: string): Promise<string> {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1')
    let out = ''
    c.setEncoding('latin1')
    c.on('data', (d: string) => { out += d })
    c.on('error', () => resolve(out))
    c.on('close', () => resolve(out))
    c.on('connect', () => c.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`))
  })
}

test('SIGTERM: requests still running at drain_timeout get 503 + Connection: close or a closed stream, upstreams are closed, exit 0', async (t) => {
  let waiting = 0
  let upstreamOpen = 0
  const server = http.createServer((req, res) => {
    waiting++
    // /stream: the head and part of the body now, the rest never; others: no answer within the test
    if (req.url === '/stream') {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.write('part of the body\n')
    }
  })
  server.on('connection', (s: net.Socket) => {
    upstreamOpen++
    s.on('close', () => { upstreamOpen-- })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.after(() => { server.closeAllConnections(); server.close() })
  const address = `127.0.0.1:${(server.address() as net.AddressInfo).port}`
  const lb = await startLb(`[global]\nworkers = 2\naccess_log = "off"\ndrain_timeout = "1s"\n\n${simpleConfig([address])}`)
  t.after(() => lb.stop('SIGKILL'))
  const plain = Array.from({ length: 20 }, (_, i) => rawGet(lb.port, `/slow/${i}`))
  const streamed = rawGet(lb.port, '/stream')
  await waitFor(() => waiting >= 21, 'every request (21) to reach the server', 5000, 10)
  assert.equal(waiting, 21)
  const started = Date.now()
  lb.proc.kill('SIGTERM')
  const exit = await new Promise<{ code: number | null, signal: string | null }>((resolve) => lb.proc.once('exit', (code, signal) => resolve({ code, signal })))
  const replies = await Promise.all(plain)
  for (const r of replies) {
    assert.match(r, /^HTTP\/1\.1 503 /, `no 503: ${JSON.stringify(r.slice(0, 200))}`)
    assert.match(r, /\r\nconnection: close\r\n/i)
    assert.match(r, /did not finish within global\.drain_timeout/)
  }
  const s = await streamed
  assert.match(s, /^HTTP\/1\.1 200 /)
  assert.match(s, /part of the body/)
  assert.doesNotMatch(s, /\r\n0\r\n\r\n$/, 'a cut stream must not look complete')
  assert.deepEqual(exit, { code: 0, signal: null }, lb.log())
  assert.ok(Date.now() - started < 4_000, `exit took ${Date.now() - started} ms`)
  assert.match(lb.log(), /"msg":"drain_timeout reached: requests cut","cut":21/)
  assert.doesNotMatch(lb.log(), /without responding|terminate called|terminating it/)
  await waitFor(() => upstreamOpen === 0, 'the upstream connections to close', 1000, 10)
})
