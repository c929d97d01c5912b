// A request whose server fails
// before any response byte is tried on another server, bounded by retries and
// retry_timeout, never when its body cannot be replayed; a server that goes
// down leaves shares in proportion to the weights of the others, exactly
// across workers; a server killed with SIGKILL under load costs no request.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import http from 'node:http'
import net from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { ROOT, childPort, count, freePort, request, simpleConfig, startBackend, startLb, waitFor } from '../helpers.js'

const GLOBAL = '[global]\nworkers = 2\naccess_log = "stdout"\n\n'

/** `n` GETs over `conns` keep-alive connections (spread over both workers by the kernel); bodies. */
async function load (url: string, n: number, conns: number): Promise<string[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: conns })
  const out: string[] = []
  let next = 0
  await Promise.all(Array.from({ length: conns }, async () => {
    while (next++ < n) out.push((await request(url, { agent })).body.trim())
  }))
  agent.destroy()
  return out
}

test('a server out of rotation: the others keep shares in proportion to their weights, exact across 2 workers', async (t) => {
  const bs = [await startBackend('a'), await startBackend('b'), await startBackend('c')]
  t.after(() => Promise.all(bs.map((b) => b.close())))
  const cfg = (weights: number[]): string => GLOBAL.replace('stdout', 'off') + simpleConfig(bs.map((b) => b.address))
    .replace(/(name = "s(\d)"\n)/g, (_m, line: string, i: string) => `${line}weight = ${weights[Number(i) - 1]}\n${i === '1' ? 'maintenance = true\n' : ''}`)
  const lb = await startLb(cfg([1, 1, 1]))
  t.after(() => lb.stop())
  const c = count(await load(`${lb.url}/`, 2_000, 8))
  assert.equal(c.a, undefined)
  assert.ok(Math.abs(c.b! - 1_000) <= 1 && Math.abs(c.c! - 1_000) <= 1, JSON.stringify(c))
  lb.write(cfg([3, 2, 1]))
  lb.reload()
  await lb.logMatching(/"generation":2/)
  const d = count(await load(`${lb.url}/`, 3_000, 8))
  assert.equal(d.a, undefined)
  assert.ok(Math.abs(d.b! - 2_000) <= 1 && Math.abs(d.c! - 1_000) <= 1, JSON.stringify(d))
})

test('connect refused: a POST with a body is sent to another server (nothing was sent), counted in the access log', async (t) => {
  const live = await startBackend('live')
  const dead = await freePort() // nothing listens there
  const lb = await startLb(GLOBAL + simpleConfig([`127.0.0.1:${dead}`, live.address], 'retries = 1'))
  t.after(async () => { await lb.stop(); await live.close() })
  for (let i = 0; i < 20; i++) {
    const r = await request(`${lb.url}/p`, { method: 'POST', body: 'x'.repeat(1000), headers: { 'content-type': 'text/plain' } })
    assert.equal(r.status, 200, r.body)
  }
  assert.equal(live.requests.length, 20)
  assert.ok(live.requests.every((r) => r.method === 'POST' && r.body === 1000))
  await waitFor(() => /"retries":1/.test(lb.stdout()), 'an access log line with "retries":1 on stdout')
  assert.match(lb.stdout(), /"method":"POST".*"server":"s2","retries":1/)
})

/** Servers stay in rotation whatever fails (no passive marking): every pick is the balancer's plain sequence. */
const noPassive = (toml: string): string => toml.replaceAll('check = false\n', 'check = false\nmax_fails = 0\n')

/** A server that reads a request and then closes the connection without a byte of answer; counts requests. */
async function resetter (afterMs = 0): Promise<{ address: string, seen: () => number, close: () => Promise<void> }> {
  let seen = 0
  const socks = new Set<net.Socket>()
  const server = net.createServer((s) => {
    socks.add(s)
    s.once('data', () => { seen++; setTimeout(() => s.destroy(), afterMs) })
    s.on('error', () => {})
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    seen: () => seen,
    close: () => new Promise((r) => { for (const s of socks) s.destroy(); server.close(() => r()) }),
  }
}

test('a reset before any response byte: GET and a PUT with its body held whole are retried; a POST and a streamed body are not', async (t) => {
  const bad = await resetter()
  const good = await startBackend('good')
  const lb = await startLb(GLOBAL + noPassive(simpleConfig([bad.address, good.address], 'retries = 1')))
  t.after(async () => { await lb.stop(); await good.close(); await bad.close() })
  const statuses: Record<string, number[]> = { GET: [], PUT: [], POST: [], streamed: [] }
  for (let i = 0; i < 6; i++) {
    statuses.GET!.push((await request(`${lb.url}/g`)).status)
    statuses.PUT!.push((await request(`${lb.url}/u`, { method: 'PUT', body: 'put-body' })).status)
    statuses.POST!.push((await request(`${lb.url}/p`, { method: 'POST', body: 'post-body' })).status)
  }
  // every GET and PUT got its answer; POSTs that went to the resetting server got 502 (it may have acted on them)
  assert.deepEqual(statuses.GET, [200, 200, 200, 200, 200, 200])
  assert.deepEqual(statuses.PUT, [200, 200, 200, 200, 200, 200])
  assert.ok(statuses.POST!.includes(502) && statuses.POST!.every((s) => s === 200 || s === 502), JSON.stringify(statuses.POST))
  assert.ok(good.requests.filter((r) => r.method === 'PUT').every((r) => r.body === 8))
  // a PUT whose body is still streaming when it reaches the server cannot be replayed: 502.
  // The balancer alternates: send until one went to the resetting server.
  const streamedPut = (): Promise<number> => new Promise<number>((resolve, reject) => {
    const req = http.request(`${lb.url}/s`, { method: 'PUT', agent: false, headers: { 'transfer-encoding': 'chunked' } }, (res) => { res.resume(); resolve(res.statusCode!) })
    req.on('error', reject)
    req.write('first part')
    setTimeout(() => req.end('second part'), 300)
  })
  let seen = bad.seen()
  let status = 200
  for (let i = 0; i < 4 && status === 200; i++) {
    seen = bad.seen()
    status = await streamedPut()
  }
  assert.equal(status, 502)
  assert.equal(bad.seen(), seen + 1)
})

test('retries and retry_timeout bound the tries (nginx proxy_next_upstream_tries / _timeout)', async (t) => {
  const rs = [await resetter(), await resetter(), await resetter(), await resetter()]
  t.after(() => Promise.all(rs.map((r) => r.close())))
  const seen = (): number => rs.reduce((a, r) => a + r.seen(), 0)
  const lb = await startLb(GLOBAL + noPassive(simpleConfig(rs.map((r) => r.address), 'retries = 2')))
  t.after(() => lb.stop())
  assert.equal((await request(`${lb.url}/`)).status, 502)
  assert.equal(seen(), 3, 'retries = 2: three tries in all')
  await lb.stop()
  // each try fails only after 300 ms: with retry_timeout = "200ms" no second try starts
  const slow = [await resetter(300), await resetter(300)]
  t.after(() => Promise.all(slow.map((r) => r.close())))
  const lb2 = await startLb(GLOBAL + noPassive(simpleConfig(slow.map((r) => r.address), 'retries = 3\nretry_timeout = "200ms"')))
  t.after(() => lb2.stop())
  assert.equal((await request(`${lb2.url}/`)).status, 502)
  assert.equal(slow[0]!.seen() + slow[1]!.seen(), 1)
})

function startProcessBackend (name: string, delayMs: number): Promise<{ proc: ChildProcess, address: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [join(ROOT, 'dist', 'test', 'fixtures', 'faults', 'backend.js'), name, String(delayMs)], { stdio: ['ignore', 'pipe', 'inherit'] })
    childPort(proc).then((port) => resolve({ proc, address: `127.0.0.1:${port}` }), reject)
    proc.once('error', reject)
  })
}

for (const [what, service] of [['fresh connections', 'keepalive = 0'], ['keep-alive connections', '']] as const) {
  test(`a server killed with SIGKILL under load costs no request, and its share is split evenly (${what})`, async (t) => {
    const bs = await Promise.all(['a', 'b', 'c'].map((n) => startProcessBackend(n, 20)))
    t.after(() => { for (const b of bs) b.proc.kill('SIGKILL') })
    // keepalive = 0: every request on a fresh connection, so a request cut by the death is never taken for
    // one sent into a stale keep-alive connection (retried on that ground alone before). With keep-alive,
    // that retry may reconnect to the dead server: its refusal must still get a retry on another one.
    const lb = await startLb(GLOBAL.replace('stdout', 'off') + simpleConfig(bs.map((b) => b.address), service))
    t.after(() => lb.stop())
    const failures: string[] = []
    const before: string[] = []
    const after: string[] = []
    let killed = false
    let stop = false
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })
    const loops = Array.from({ length: 16 }, async () => {
      while (!stop) {
        try {
          const r = await request(`${lb.url}/`, { agent })
          if (r.status !== 200) failures.push(`${r.status} ${r.body.trim()}`)
          else (killed ? after : before).push(r.body.trim())
        } catch (err) {
          failures.push((err as Error).message)
        }
      }
    })
    t.after(() => { stop = true }) // also when a wait fails: a loop left running keeps the file from ending
    // under load: every server has answered, so some requests are in flight to the one killed
    await waitFor(() => Object.values(count(before)).filter((n) => n >= 20).length === 3, '20 answers from each of the three servers before the kill', 10_000, 5)
    bs[0]!.proc.kill('SIGKILL')
    killed = true
    // the split is measured over a number of answers, however long they take on this machine
    await waitFor(() => after.length >= 400, '400 answers after the kill', 20_000, 5)
    stop = true
    await Promise.all(loops)
    agent.destroy()
    assert.deepEqual(failures, [])
    const c = count(after)
    // the dead server gets no answer in; the two others split evenly (not 2:1 as before)
    assert.ok(Math.abs(c.b! / (c.b! + c.c!) - 0.5) < 0.05, JSON.stringify(c))
    t.diagnostic(`after the kill: ${JSON.stringify(c)}`)
  })
}
