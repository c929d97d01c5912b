// Pipelining (RFC 9112 §9.3.2), as this uWS build allows it (README, "Request
// forms at the edge"): requests lb answers within the request callback are
// answered in order; a request sent while a forwarded one is still unanswered
// makes uWS close the connection (it refuses "async pipelining" so that answers
// never cross). What lb must still guarantee: no request is forwarded twice,
// the one behind is never forwarded, and no answer reaches another client.
import { strict as assert } from 'node:assert'
import { test } from 'node:test'
import { type Lb, request, startBackend, startLb, waitFor } from '../helpers.js'
import { pipeline } from './raw-http.js'

const GET = (path: string): string => `GET ${path} HTTP/1.1\r\nhost: a\r\n\r\n`

async function start (t: { after: (fn: () => Promise<void>) => void }): Promise<{ lb: Lb, seen: string[], held: () => number, release: () => void }> {
  const seen: string[] = []
  const waiting: Array<() => void> = []
  // answers "url=<path>" once released, so a test decides when the answer may go
  const web = await startBackend('web', (req, res) => { seen.push(req.url!); waiting.push(() => res.end(`url=${req.url!}`)) })
  const lb = await startLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.web]
rule = "PathPrefix(\`/p\`)"
service = "web"
[routers.status]
rule = "Path(\`/status\`)"
service = "status"
[services.status]
kind = "status"
allow = ["127.0.0.0/8"]
[[services.web.servers]]
address = "${web.address}"
check = false
`)
  t.after(async () => { await lb.stop(); await web.close() })
  return { lb, seen, held: () => waiting.length, release: () => { for (const w of waiting.splice(0)) w() } }
}

/** Until `cond` holds; fails after 10 s (the request it waits for never came) rather than waiting for ever. */
async function until (cond: () => boolean): Promise<void> {
  await waitFor(cond, 'the held request to reach the backend', 10_000, 5)
}

test('requests lb answers itself are answered in order when pipelined, on a connection kept open', async (t) => {
  const { lb } = await start(t)
  const r = await pipeline(lb.port, [GET('/status') + GET('/nowhere') + GET('/status')], undefined, 1000)
  assert.equal(r.closed, false)
  assert.deepEqual(r.text.match(/^HTTP\/1\.1 \d{3}/gm), ['HTTP/1.1 200', 'HTTP/1.1 404', 'HTTP/1.1 200'])
})

test('a request pipelined behind a forwarded one: closed without an answer, nothing forwarded twice, the second never', async (t) => {
  const { lb, seen, held, release } = await start(t)
  // both in one write: uWS reads the second before the first could be forwarded
  const one = await pipeline(lb.port, [GET('/p1') + GET('/p2')])
  assert.deepEqual({ closed: one.closed, text: one.text }, { closed: true, text: '' })
  // the second written once the first reached the server: the first was forwarded once, its answer is dropped
  const two = await pipeline(lb.port, [GET('/p3'), GET('/p4')], async (i) => { if (i === 1) await until(() => held() === 1) })
  assert.deepEqual({ closed: two.closed, text: two.text }, { closed: true, text: '' })
  // the dropped answer goes to no one: a client after it gets its own
  const next = request(`${lb.url}/p5`)
  await until(() => held() === 2)
  release()
  assert.equal((await next).body, 'url=/p5')
  assert.deepEqual(seen, ['/p3', '/p5'])
})
