// The proxy path through the real balancer (2 workers) with real backends and clients.
import { strict as assert } from 'node:assert'
import { createHash } from 'node:crypto'
import { spawn } from 'node:child_process'
import http from 'node:http'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, childPort, count, freePort, getMany, request, simpleConfig, sleep, startBackend, startLb, waitFor } from '../helpers.js'

describe('routing and forwarding', () => {
  let web: Backend, api: Backend, admin: Backend, lb: Lb
  before(async () => {
    const echo: Parameters<typeof startBackend>[1] = (req, res, name) => {
      req.resume()
      req.on('end', () => {
        res.setHeader('content-type', 'application/json')
        res.setHeader('connection', 'keep-alive')
        res.setHeader('x-backend', name)
        res.end(JSON.stringify({ name, url: req.url, headers: req.headers }))
      })
    }
    web = await startBackend('web', echo)
    api = await startBackend('api', echo)
    admin = await startBackend('admin', echo)
    lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.api]
rule = "PathPrefix(\`/api/\`)"
service = "api"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[routers.admin]
rule = "Host(\`admin.example\`) && PathPrefix(\`/\`)"
service = "admin"
[routers.lowpri]
rule = "Path(\`/api/x\`) || Path(\`/other\`)"
priority = 1
service = "admin"
[services.web]
[[services.web.servers]]
address = "${web.address}"
check = false
[services.api]
[[services.api.servers]]
address = "${api.address}"
check = false
[services.admin]
[[services.admin.servers]]
address = "${admin.address}"
check = false
`)
  })
  after(async () => { await lb.stop(); await web.close(); await api.close(); await admin.close() })

  test('a path beginning with /api/ goes to the api backend, the rest to web; the longer rule wins', async () => {
    assert.equal(JSON.parse((await request(`${lb.url}/api/generate`)).body).name, 'api')
    assert.equal(JSON.parse((await request(`${lb.url}/api`)).body).name, 'web')
    assert.equal(JSON.parse((await request(`${lb.url}/index.html?x=1`)).body).url, '/index.html?x=1')
    // priority 1 is below the derived priorities (rule lengths) of the others
    assert.equal(JSON.parse((await request(`${lb.url}/api/x`)).body).name, 'api')
    assert.equal(JSON.parse((await request(`${lb.url}/other`)).body).name, 'web')
  })

  test('host rules route by the Host header, without the port, case-insensitively', async () => {
    const r = await request(`${lb.url}/`, { headers: { host: 'Admin.Example:8080' } })
    assert.equal(JSON.parse(r.body).name, 'admin')
    // a worker reuses the host it parsed last while Host repeats: a changed Host must route anew
    for (const [host, name] of [['admin.example', 'admin'], ['web.example', 'web'], ['ADMIN.EXAMPLE:1', 'admin'], ['admin.example.org', 'web'], ['admin.example', 'admin']]) {
      assert.equal(JSON.parse((await request(`${lb.url}/`, { headers: { host } })).body).name, name, host)
    }
  })

  test('Host kept, X-Real-IP set, X-Forwarded-For appended, X-Forwarded-Proto set, hop-by-hop headers dropped', async () => {
    const r = await request(`${lb.url}/h`, {
      headers: {
        host: 'www.example:1234', 'x-forwarded-for': '203.0.113.7', 'x-real-ip': '6.6.6.6', 'x-forwarded-proto': 'https', 'keep-alive': 'timeout=5', te: 'trailers', 'x-keep': 'yes',
        // what CGI/WSGI/Rack backends read as HTTP_X_REAL_IP and HTTP_X_FORWARDED_FOR: dropped, while other underscores pass
        x_real_ip: '6.6.6.6', 'X_Forwarded-For': '6.6.6.6', x_keep_me: 'yes',
      },
    })
    const h = JSON.parse(r.body).headers
    assert.equal(h.host, 'www.example:1234')
    assert.equal(h['x-real-ip'], '127.0.0.1')
    assert.equal(h['x-forwarded-for'], '203.0.113.7, 127.0.0.1')
    assert.equal(h['x-forwarded-proto'], 'http')
    assert.equal(h['keep-alive'], undefined)
    assert.equal(h.te, undefined)
    assert.equal(h['x-keep'], 'yes')
    assert.deepEqual([h.x_real_ip, h['x_forwarded-for'], h.x_keep_me], [undefined, undefined, 'yes'])
    assert.equal(r.headers['x-backend'], 'web')
    // the upstream's hop-by-hop "Connection: keep-alive" is not relayed; this client sent
    // Connection: close (agent: false), and the balancer says it closes (RFC 9112 §9.6)
    assert.equal(r.headers.connection, 'close')
  })

  test('UTF-8 in the query and header values reaches the other side byte for byte, both ways', async (t) => {
    // (uWS drops non-ASCII bytes at either end of a request header value, a limit stated in the README: these begin and end in ASCII)
    // (a raw non-ASCII path is refused, README "Request paths"; percent-encoded it is kept as sent)
    // a raw backend: records the request head's bytes and answers with UTF-8 in a header and the reason
    let seen = Buffer.alloc(0)
    const raw = net.createServer((s) => {
      let buf = Buffer.alloc(0)
      s.on('data', (d) => {
        buf = Buffer.concat([buf, d])
        const end = buf.indexOf('\r\n\r\n')
        if (end < 0) return
        seen = buf.subarray(0, end)
        buf = Buffer.alloc(0)
        s.write(Buffer.concat([Buffer.from('HTTP/1.1 200 Tr\u00e8s bien\r\nx-name: ', 'latin1'), Buffer.from('caf\u00e9 \u65e5\u672c.txt', 'utf8'),
          Buffer.from('\r\ncontent-length: 2\r\n\r\nok')]))
      })
    })
    await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve))
    const rawLb = await startLb(simpleConfig([`127.0.0.1:${(raw.address() as net.AddressInfo).port}`]))
    t.after(async () => { await rawLb.stop(); raw.close() })
    const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8')
    const answer = await new Promise<Buffer>((resolve, reject) => {
      const c = net.connect(rawLb.port, '127.0.0.1', () => {
        c.write(Buffer.concat([utf8('GET /d%C3%A9j%C3%A0/%E6%97%A5%E6%9C%AC?q=\u00fc HTTP/1.1\r\nhost: x\r\nx-file: l\u2019\u00e9t\u00e9 \u65e5\u672c.txt\r\n'),
          utf8('connection: close\r\n\r\n')]))
      })
      const parts: Buffer[] = []
      c.on('data', (d) => parts.push(d))
      c.on('end', () => resolve(Buffer.concat(parts)))
      c.on('error', reject)
    })
    const head = seen.toString('utf8')
    assert.ok(head.startsWith('GET /d%C3%A9j%C3%A0/%E6%97%A5%E6%9C%AC?q=\u00fc HTTP/1.1\r\n'), JSON.stringify(head))
    assert.ok(seen.includes(utf8('\r\nx-file: l\u2019\u00e9t\u00e9 \u65e5\u672c.txt\r\n')), JSON.stringify(head))
    assert.ok(answer.includes(utf8('\r\nx-name: caf\u00e9 \u65e5\u672c.txt\r\n')), JSON.stringify(answer.toString('latin1')))
    assert.ok(answer.subarray(0, 30).toString('latin1').startsWith('HTTP/1.1 200 Tr'), 'status line')
  })

  test('/health is answered by the balancer itself on every entry point', async () => {
    const r = await request(`${lb.url}/health`)
    assert.equal(r.status, 200)
    assert.equal(r.headers['content-type'], 'text/plain')
    assert.ok(r.body.length > 0 && r.body.length < 16)
    assert.equal(web.requests.filter((x) => x.url === '/health').length, 0)
  })
})

describe('bodies, limits and errors', () => {
  let lb: Lb
  let held: http.ServerResponse[] = []
  const closedRequests: string[] = []
  let good: Backend
  const SIZED_BATCH = 100
  const sizedHeld: Array<() => void> = []
  let refusedPort: number
  let resetServer: net.Server, garbageServer: net.Server
  before(async () => {
    good = await startBackend('good', (req, res) => {
      if (req.url === '/download') {
        // 64 MiB in 64 KiB writes, counting how far it got: backpressure must stop it early
        let sent = 0
        const chunk = Buffer.alloc(65536, 97)
        const pump = (): void => {
          while (sent < 64 * 1024 * 1024) {
            sent += chunk.length
            ;(res as unknown as { sentBytes: number }).sentBytes = sent
            if (!res.write(chunk)) { res.once('drain', pump); return }
          }
          res.end()
        }
        held.push(res)
        pump()
        return
      }
      if (req.url === '/hang') {
        held.push(res)
        req.on('close', () => closedRequests.push('hang'))
        return
      }
      if (req.url === '/slow-headers') { setTimeout(() => res.end('late\n'), 3000); return }
      const sized = /^\/sized\/(\d+)\/(\d+)$/.exec(req.url ?? '')
      if (sized !== null) {
        // answered in batches, all at once, so that the balancer reads many responses in one loop turn
        sizedHeld.push(() => res.writeHead(200, { 'content-length': sized[2]! }).end(sizedBody(sized[1]!, Number(sized[2]))))
        if (sizedHeld.length >= SIZED_BATCH) for (const f of sizedHeld.splice(0)) f()
        return
      }
      let n = 0
      const hash = createHash('sha256')
      req.on('data', (d: Buffer) => { n += d.length; hash.update(d) })
      req.on('end', () => res.end(JSON.stringify({ n, sha: hash.digest('hex'), te: req.headers['transfer-encoding'] ?? '' })))
    })
    refusedPort = await freePort()
    const listening = (s: net.Server): Promise<net.Server> => new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(s)))
    resetServer = await listening(net.createServer((s) => s.on('data', () => s.resetAndDestroy())))
    garbageServer = await listening(net.createServer((s) => s.on('data', () => s.end('this is not http\r\n\r\n'))))
    const port = (s: net.Server): number => (s.address() as net.AddressInfo).port
    lb = await startLb(`
[timeouts]
server = "1s"
[limits]
max_body = "32M"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.good]
rule = "PathPrefix(\`/\`)"
service = "good"
[routers.refused]
rule = "PathPrefix(\`/refused\`)"
service = "refused"
[routers.reset]
rule = "PathPrefix(\`/reset\`)"
service = "reset"
[routers.garbage]
rule = "PathPrefix(\`/garbage\`)"
service = "garbage"
[routers.empty]
rule = "PathPrefix(\`/empty\`)"
service = "empty"
[routers.retry]
rule = "PathPrefix(\`/retry\`)"
service = "retry"
[services.good]
[[services.good.servers]]
address = "${good.address}"
check = false
[services.refused]
[[services.refused.servers]]
address = "127.0.0.1:${refusedPort}"
check = false
max_fails = 0
[services.reset]
[[services.reset.servers]]
address = "127.0.0.1:${port(resetServer)}"
check = false
max_fails = 0
[services.garbage]
[[services.garbage.servers]]
address = "127.0.0.1:${port(garbageServer)}"
check = false
max_fails = 0
[services.empty]
[services.retry]
[[services.retry.servers]]
name = "dead"
address = "127.0.0.1:${refusedPort}"
check = false
max_fails = 0
[[services.retry.servers]]
name = "alive"
address = "${good.address}"
check = false
`)
  })
  after(async () => {
    for (const r of held) r.destroy()
    await lb.stop()
    await good.close()
    resetServer.close()
    garbageServer.close()
  })

  test('request bodies stream to the server intact, with Content-Length or chunked', async () => {
    const body = Buffer.alloc(20 * 1024 * 1024)
    for (let i = 0; i < body.length; i += 4096) body[i] = i & 255
    const sha = createHash('sha256').update(body).digest('hex')
    const fixed = JSON.parse((await request(`${lb.url}/up`, { method: 'POST', body })).body)
    assert.deepEqual([fixed.n, fixed.sha], [body.length, sha])
    const chunked = await new Promise<string>((res, rej) => {
      const req = http.request(`${lb.url}/up`, { method: 'POST', agent: false }, (r) => {
        let s = ''
        r.on('data', (d) => { s += d })
        r.on('end', () => res(s))
      })
      req.on('error', rej)
      for (let i = 0; i < body.length; i += 1024 * 1024) req.write(body.subarray(i, i + 1024 * 1024))
      req.end()
    })
    const c = JSON.parse(chunked)
    assert.deepEqual([c.n, c.sha, c.te], [body.length, sha, 'chunked'])
  })

  test('concurrent responses each reach their own client intact, whatever their size', async () => {
    // whole bodies up to 16 KiB are staged together for the end of the loop turn (core/net/turn.ts),
    // longer ones written at once: a body staged at the wrong place would reach its client as another's
    const sizes = [1, 100, 3000, 16 * 1024, 16 * 1024 + 1, 60000]
    const agent = new http.Agent({ keepAlive: true, maxSockets: SIZED_BATCH })
    try {
      const got = await Promise.all(Array.from({ length: 400 }, async (_, i) => {
        const n = sizes[i % sizes.length]!
        const r = await request(`${lb.url}/sized/${i}/${n}`, { agent })
        return r.status === 200 && r.body === sizedBody(String(i), n) ? 'ok' : `request ${i}: status ${r.status}, ${r.body.length} bytes`
      }))
      assert.deepEqual(got.filter((x) => x !== 'ok'), [])
    } finally {
      agent.destroy()
    }
  })

  test('a slow client holds the server back (backpressure): the response is never buffered whole', async () => {
    held = []
    let got = 0
    const res = await new Promise<http.IncomingMessage>((resolve) => http.get(`${lb.url}/download`, { agent: false }, resolve))
    res.pause()
    await sleep(1500) // the thing tested: the client reads nothing for 1.5 s, and the server must not get far meanwhile
    const server = held[0] as unknown as { sentBytes: number }
    assert.ok(server.sentBytes < 24 * 1024 * 1024, `server pushed ${server.sentBytes} bytes while the client read nothing`)
    res.on('data', (d: Buffer) => { got += d.length })
    res.resume()
    await new Promise((r) => res.on('end', r))
    assert.equal(got, 64 * 1024 * 1024)
  })

  test('413 before anything is forwarded when the declared body is over max_body; also for a chunked body that grows past it', async () => {
    const before = good.requests.length
    const r = await new Promise<number>((res) => {
      const req = http.request(`${lb.url}/big`, { method: 'POST', agent: false, headers: { 'content-length': String(33 * 1024 * 1024) } }, (x) => { x.resume(); res(x.statusCode!) })
      req.on('error', () => res(-1))
      req.write('x')
    })
    assert.equal(r, 413)
    // a raw socket: node's http client closes its own socket when the response
    // ends while it is still writing, which would hide what the server did.
    // It sends 33 MiB and stops: lb closes after a chunked body's answer, and a
    // client still writing then may see a reset first (README, "Chunked request bodies").
    const chunked = await new Promise<string>((res) => {
      const s = net.connect(lb.port, '127.0.0.1', () => {
        s.write('POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n')
        const mb = Buffer.concat([Buffer.from('100000\r\n'), Buffer.alloc(1024 * 1024), Buffer.from('\r\n')])
        let i = 0
        const pump = (): void => { while (i++ < 33) if (!s.write(mb)) { s.once('drain', pump); return } }
        pump()
      })
      s.once('data', (d: Buffer) => { res(d.toString('latin1').split('\r\n')[0]!); s.destroy() })
      s.on('error', (e) => res(e.message))
    })
    assert.equal(chunked, 'HTTP/1.1 413 Payload Too Large')
    assert.equal(good.requests.filter((x) => x.url === '/big' && x.body > 32 * 1024 * 1024).length, 0)
    // the body, paused hundreds of times while the server's socket was full, waited on one 'drain' listener at a time
    assert.doesNotMatch(lb.log(), /MaxListenersExceededWarning/)
    assert.ok(good.requests.length >= before)
  })

  test('502 when the server refuses, resets or answers garbage; 503 when no server is up; 504 on server time-out', async () => {
    assert.equal((await request(`${lb.url}/refused`)).status, 502)
    assert.equal((await request(`${lb.url}/reset`)).status, 502)
    const g = await request(`${lb.url}/garbage`)
    assert.equal(g.status, 502)
    assert.match(g.body, /invalid response/)
    const e = await request(`${lb.url}/empty`)
    assert.equal(e.status, 503)
    assert.match(e.body, /no server available for service empty/)
    const t = await request(`${lb.url}/slow-headers`)
    assert.equal(t.status, 504)
  })

  test('a request whose connect fails is retried once on another server, a POST too: nothing of it was sent', async () => {
    const bodies = await getMany(`${lb.url}/retry/x`, 10)
    assert.ok(bodies.every((b) => JSON.parse(b).n === 0), bodies.join('|'))
    const posts = await Promise.all(Array.from({ length: 6 }, () => request(`${lb.url}/retry/p`, { method: 'POST', body: 'x' })))
    assert.deepEqual(count(posts.map((p) => String(p.status))), { 200: 6 })
  })

  test('a client that goes away cancels its upstream request', async () => {
    held = []
    const req = http.get(`${lb.url}/hang`, { agent: false })
    req.on('error', () => undefined)
    await waitFor(() => held.length > 0, 'the request to reach the server')
    assert.equal(held.length, 1)
    req.destroy()
    await waitFor(() => closedRequests.length > 0, 'the upstream request to be closed')
    assert.deepEqual(closedRequests, ['hang'])
  })

  test('upstream keep-alive: many requests reuse a few connections', async () => {
    const before = good.connections
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 })
    await Promise.all(Array.from({ length: 400 }, () => request(`${lb.url}/ka`, { agent })))
    agent.destroy()
    assert.ok(good.connections - before <= 16, `${good.connections - before} new upstream connections for 400 requests`)
  })
})

/**
 * A loopback address whose connects hang, as a firewalled host: a child process
 * listens with the smallest accept queue and then blocks its event loop, so it
 * never accepts; once the queue is full the kernel drops further SYNs.
 */
async function blackHole (): Promise<{ address: string, close: () => void }> {
  const child = spawn(process.execPath, ['-e', `
    const s = require('node:net').createServer().listen({ port: 0, host: '127.0.0.1', backlog: 0 }, () => {
      require('node:fs').writeSync(1, s.address().port + '\\n')
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0) // never accept
    })`], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await childPort(child)
  // fill the accept queue until a connect no longer completes within 900 ms (a dropped SYN is retried after 1 s; 200 ms could be a stall of this process)
  const fillers: net.Socket[] = []
  for (;;) {
    const s = net.connect(port, '127.0.0.1')
    fillers.push(s)
    s.on('error', () => {})
    const connected = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), 900)
      s.once('connect', () => { clearTimeout(t); resolve(true) })
    })
    if (!connected) break
  }
  return { address: `127.0.0.1:${port}`, close: () => { for (const s of fillers) s.destroy(); child.kill('SIGKILL') } }
}

describe('time-outs', () => {
  test('a connect that hangs times out after timeouts.connect: a GET goes to another server, a POST gets 504', async (t) => {
    const hole = await blackHole()
    const good = await startBackend('good')
    const toml = (servers: string[]): string => simpleConfig(servers, '', '[timeouts]\nconnect = "300ms"')
    const both = await startLb(toml([hole.address, good.address]))
    const holeOnly = await startLb(toml([hole.address]))
    t.after(async () => { await both.stop(); await holeOnly.stop(); await good.close(); hole.close() })

    // round robin sends every other request to the black hole: each of those is retried on the good server
    const started = Date.now()
    const replies = await Promise.all(Array.from({ length: 4 }, async () => await request(`${both.url}/r`)))
    assert.deepEqual(replies.map((r) => r.status), [200, 200, 200, 200])
    const waited = Date.now() - started
    assert.ok(waited >= 250 && waited < 3000, `retried after the connect time-out, not after the kernel's (${waited} ms)`)

    const t0 = Date.now()
    const post = await request(`${holeOnly.url}/p`, { method: 'POST', body: 'x'.repeat(10) })
    const took = Date.now() - t0
    assert.equal(post.status, 504)
    assert.match(post.body, /timed out/)
    assert.ok(took >= 250 && took < 3000, `504 after the connect time-out (${took} ms)`)
  })

  test('a client that stops sending its body gets 408 after the client time-out; idle upstream connections close after keep_alive', async (t) => {
    const closed: number[] = []
    const backend = await startBackend('b')
    const server = await new Promise<http.Server>((r) => {
      const s = http.createServer((req, res) => { req.resume(); req.on('end', () => res.end('ok\n')) })
      s.on('connection', (sock) => sock.on('close', () => closed.push(Date.now())))
      s.listen(0, '127.0.0.1', () => r(s))
    })
    const lb = await startLb(`
[timeouts]
client = "400ms"
keep_alive = "400ms"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "127.0.0.1:${(server.address() as net.AddressInfo).port}"
check = false
`)
    t.after(async () => { await lb.stop(); await backend.close(); server.close() })
    const [status, connection] = await new Promise<[number, string | undefined]>((res) => {
      const req = http.request(`${lb.url}/upload`, { method: 'POST', agent: false, headers: { 'content-length': '100' } }, (r) => { r.resume(); res([r.statusCode!, r.headers.connection]) })
      req.on('error', () => res([-1, undefined]))
      req.write('only part of it')
    })
    assert.equal(status, 408)
    assert.equal(connection, 'close', 'the balancer says it closes the connection it will close')
    assert.equal((await request(`${lb.url}/x`)).status, 200)
    const before = closed.length
    // keep_alive is 400 ms: well before 3 s
    await waitFor(() => closed.length > before, 'the balancer to close the idle upstream connection (keep_alive 400 ms)', 3000)
  })
})

/** `n` bytes that differ for every `id`: a response delivered to the wrong client cannot match. */
function sizedBody (id: string, n: number): string {
  return (id + '.').repeat(Math.ceil(n / (id.length + 1))).slice(0, n)
}
