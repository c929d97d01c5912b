// TCP mode through the real balancer (2 workers): raw bytes both ways with
// half-close, balancing, failover when a server dies, TCP health checks, the
// idle time-out, and the connection census and cap counting TCP connections.
import { strict as assert } from 'node:assert'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type Lb, firstChecksPassed, request, sleep, startLb, waitFor } from '../helpers.js'

interface Echo {
  readonly name: string
  port: number
  readonly address: string
  readonly sockets: Set<net.Socket>
  stop (): Promise<void>
  start (): Promise<void>
}

/** A TCP echo server: greets with "<name>\n", echoes everything, answers a half-close with its own. */
async function startEcho (name: string, port = 0): Promise<Echo> {
  const sockets = new Set<net.Socket>()
  let server: net.Server | null = null
  const e: Echo = {
    name,
    port,
    address: '',
    sockets,
    start: async () => {
      server = net.createServer({ allowHalfOpen: true }, (s) => {
        sockets.add(s)
        s.on('close', () => sockets.delete(s))
        s.on('error', () => undefined)
        s.write(`${name}\n`)
        s.pipe(s)
      })
      await new Promise<void>((resolve) => server!.listen(e.port, '127.0.0.1', resolve))
      e.port = (server.address() as net.AddressInfo).port
      Object.assign(e, { address: `127.0.0.1:${e.port}` })
    },
    stop: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy()
      if (server === null) resolve()
      else server.close(() => resolve())
      server = null
    }),
  }
  await e.start()
  return e
}

interface Conn { sock: net.Socket, greeting: Promise<string>, data: () => Buffer, ended: Promise<void> }

/** Connects and reads the greeting line; collects the rest. */
function open (port: number): Conn {
  const sock = net.connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  let resolveGreeting: (s: string) => void = () => undefined
  const greeting = new Promise<string>((resolve, reject) => {
    resolveGreeting = resolve
    sock.once('error', reject)
    sock.once('close', () => reject(new Error('closed before the greeting')))
  })
  let buffered = Buffer.alloc(0)
  let greeted = false
  sock.on('data', (d: Buffer) => {
    if (greeted) {
      chunks.push(d)
      return
    }
    buffered = Buffer.concat([buffered, d])
    const nl = buffered.indexOf(10)
    if (nl < 0) return
    greeted = true
    resolveGreeting(buffered.subarray(0, nl).toString())
    if (nl + 1 < buffered.length) chunks.push(buffered.subarray(nl + 1))
  })
  const ended = new Promise<void>((resolve) => sock.once('close', () => resolve()))
  return { sock, greeting, data: () => Buffer.concat(chunks), ended }
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex')

function tcpConfig (servers: string[], extra = '', global = ''): string {
  return `[global]
workers = 2
access_log = "off"
${global}
[timeouts]
tunnel = "2s"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.db]
address = "127.0.0.1:0"
protocol = "tcp"
service = "echo"
[routers.status]
rule = "Path(\`/status\`)"
service = "status"
[services.status]
kind = "status"
[services.echo]
[services.echo.health_check]
type = "tcp"
interval = "200ms"
timeout = "200ms"
rise = 2
fall = 2
${servers.map((a, i) => `[[services.echo.servers]]\nname = "s${i + 1}"\naddress = "${a}"\nmax_fails = 1\nfail_timeout = "1s"`).join('\n')}
${extra}`
}

describe('TCP mode', () => {
  let a: Echo, b: Echo, lb: Lb, tcp: number
  before(async () => {
    a = await startEcho('a')
    b = await startEcho('b')
    lb = await startLb(tcpConfig([a.address, b.address]))
    tcp = await lb.portOf('db')
    await firstChecksPassed(lb, ['s1', 's2'])
  })
  after(async () => { await lb.stop(); await a.stop(); await b.stop() })

  test('bytes relay both ways; a half-close passes through; round robin over the servers', async () => {
    const names: string[] = []
    for (let i = 0; i < 4; i++) {
      const c = open(tcp)
      names.push(await c.greeting)
      c.sock.destroy()
    }
    assert.deepEqual([...names].sort(), ['a', 'a', 'b', 'b'])
    // 8 MiB up, then the client shuts down its side: the whole echo comes back, then the server's end
    const c = open(tcp)
    await c.greeting
    const big = Buffer.alloc(8 * 1024 * 1024)
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32BE(i, i)
    c.sock.end(big)
    await c.ended
    assert.equal(c.data().length, big.length)
    assert.equal(sha(c.data()), sha(big))
  })

  test('TCP connections are counted as they open and close (status page)', async () => {
    const active = async (): Promise<number> => Number(/Active connections: (\d+)/.exec((await request(`${lb.url}/status`)).body)![1])
    const before = await active() // the status request's own connection included
    const conns = [open(tcp), open(tcp), open(tcp)]
    await Promise.all(conns.map((c) => c.greeting))
    assert.equal(await active(), before + 3)
    for (const c of conns) c.sock.destroy()
    let now = await active()
    for (let i = 0; i < 100 && now !== before; i++) {
      await sleep(20)
      now = await active()
    }
    assert.equal(now, before, 'closed sessions are no longer counted')
  })

  test('failover: when a server dies, new connections go to the other one; the check marks it DOWN, then UP', async () => {
    const onB = open(tcp)
    const first = open(tcp)
    const greetings = [await onB.greeting, await first.greeting]
    const victim = greetings[0] === 'b' ? onB : first
    await b.stop()
    await victim.ended // its session ends with its server
    // right away, before any check ran: the failed connect is retried on a
    for (let i = 0; i < 6; i++) {
      const c = open(tcp)
      assert.equal(await c.greeting, 'a')
      c.sock.destroy()
    }
    await lb.logMatching(/server DOWN.*"server":"s2"/)
    assert.match(lb.log(), /server DOWN.*"check":"L4CON"/)
    await b.start()
    await lb.logMatching(/server UP.*"server":"s2"/)
    assert.match(lb.log(), /server UP.*"server":"s2"/)
    // the failed connect took s2 out for fail_timeout (max_fails 1): back once a connection reaches it again
    await waitFor(async () => {
      const c = open(tcp)
      const name = await c.greeting.catch(() => '')
      c.sock.destroy()
      return name === 'b'
    }, 'a connection to reach s2 (b) again after its passive fail_timeout (1 s)', 5000, 50)
    const names: string[] = []
    for (let i = 0; i < 4; i++) {
      const c = open(tcp)
      names.push(await c.greeting)
      c.sock.destroy()
    }
    assert.deepEqual([...names].sort(), ['a', 'a', 'b', 'b'])
    onB.sock.destroy()
    first.sock.destroy()
  })

  test('idle time-out (timeouts.tunnel): traffic keeps a session open, silence closes it', async () => {
    const c = open(tcp)
    await c.greeting
    for (let i = 0; i < 5; i++) {
      await sleep(500) // the pacing is the thing tested: 2.5 s in all, longer than the 2 s time-out
      c.sock.write('x')
    }
    assert.equal(c.sock.destroyed, false)
    const t0 = Date.now()
    await c.ended
    const waited = Date.now() - t0
    assert.ok(waited > 1500 && waited < 4000, `closed after ${waited} ms of silence`)
  })
})

test('TCP connections count toward global.max_connections: one over the cap is closed at once', async (t) => {
  const a = await startEcho('a')
  const lb = await startLb(tcpConfig([a.address], '', 'max_connections = 3'))
  const tcp = await lb.portOf('db')
  t.after(async () => { await lb.stop(); await a.stop() })
  const conns = [open(tcp), open(tcp), open(tcp)]
  await Promise.all(conns.map((c) => c.greeting))
  // the fourth gets no greeting: lb closes it before connecting it to a server
  const over = open(tcp)
  await assert.rejects(over.greeting, /closed before the greeting|ECONNRESET/)
  await over.ended
  assert.equal(over.data().length, 0)
  conns[0]!.sock.destroy()
  await conns[0]!.ended
  let again = open(tcp)
  for (let i = 0; i < 100 && await again.greeting.catch(() => '') === ''; i++) {
    await sleep(20)
    again = open(tcp)
  }
  assert.equal(await again.greeting, 'a', 'accepted again below the cap')
  for (const c of [...conns, again]) c.sock.destroy()
})

test('every TCP session is access-logged when it ends: 200 with its bytes, 502 when the connect failed, 503 when no server was usable', async (t) => {
  const a = await startEcho('a')
  // fall 100 (20 s): the active check must not take the stopped server out before the first connect is refused (the 502)
  const lb = await startLb(tcpConfig([a.address]).replace('access_log = "off"', 'access_log = "{{DIR}}/access.log"').replace('fall = 2', 'fall = 100'))
  const tcp = await lb.portOf('db')
  t.after(async () => { await lb.stop(); await a.stop() })
  await firstChecksPassed(lb, ['s1'])
  const ok = open(tcp)
  assert.equal(await ok.greeting, 'a')
  ok.sock.end('ping\n')
  await ok.ended
  await a.stop()
  // refused at once: a 502 (before the health check notices); max_fails 1 then takes the server out: a 503
  for (let i = 0; i < 2; i++) {
    await new Promise((resolve) => {
      const s = net.connect(tcp, '127.0.0.1')
      s.on('error', () => undefined)
      s.on('close', resolve) // the balancer closes the session: no server to relay to
    })
  }
  // each worker flushes its log lines every 100 ms: wait for the three sessions' lines
  const tcpLines = await waitFor(() => {
    const file = `${lb.dir}/access.log`
    // whole lines only: the last piece is '' or a line still being written
    const lines = existsSync(file) ? readFileSync(file, 'utf8').split('\n').slice(0, -1).map((l) => JSON.parse(l) as Record<string, unknown>) : []
    const tcp = lines.filter((l) => l.protocol === 'tcp')
    return tcp.length >= 3 ? tcp : null
  }, 'three TCP sessions in the access log')
  assert.deepEqual(tcpLines.map((l) => l.status), [200, 502, 503])
  assert.deepEqual(
    { ...tcpLines[0], time: undefined, duration_ms: undefined },
    { time: undefined, duration_ms: undefined, protocol: 'tcp', client: '127.0.0.1', entrypoint: 'db', status: 200, bytes_in: 5, bytes_out: 7, service: 'echo', server: 's1' }
  )
  assert.equal(typeof tcpLines[0]!.duration_ms, 'number')
  assert.equal(tcpLines[1]!.server, 's1')
})
