// Upstream client cost: our node:net pool (core/upstream) against undici 7's
// Pool.dispatch (its cheapest API), same backend, same concurrency, rounds
// interleaved A B A B. Reports client CPU microseconds per request (the
// process's user+system time; the backend runs in a child process) and the
// ratio per round. Usage: node dist/bench/micro/upstream-client.js [requests] [concurrency] [rounds]
import { fork } from 'node:child_process'
import net from 'node:net'
import { fileURLToPath } from 'node:url'
import { Pool } from 'undici'
import { startClock } from '../../core/clock.js'
import type { ErrorCode } from '../../core/errors.js'
import type { Exchange, UpstreamConnection } from '../../core/upstream/connection.js'
import { ServerPool } from '../../core/upstream/pool.js'

const REQUESTS = Number(process.argv[2] ?? 100_000)
const CONCURRENCY = Number(process.argv[3] ?? 64)
const ROUNDS = Number(process.argv[4] ?? 3)

if (process.argv[2] === 'backend') {
  // canned 16-byte keep-alive responses: as cheap a server as possible
  const reply = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 16\r\n\r\n0123456789abcdef'
  const srv = net.createServer((s) => {
    s.setNoDelay(true)
    let pending = ''
    s.on('data', (d) => {
      pending += d.toString('latin1')
      let out = ''
      let i: number
      while ((i = pending.indexOf('\r\n\r\n')) >= 0) { pending = pending.slice(i + 4); out += reply }
      if (out !== '') s.write(out)
    })
  })
  srv.listen(0, '127.0.0.1', () => process.send!((srv.address() as net.AddressInfo).port))
} else {
  void main()
}

const HEAD = (port: number): string => `GET / HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nx-real-ip: 127.0.0.1\r\nx-forwarded-for: 127.0.0.1\r\nx-forwarded-proto: http\r\n\r\n`

function runOurs (port: number): Promise<void> {
  const pool = new ServerPool({ name: 'b', address: `127.0.0.1:${port}`, host: '127.0.0.1', port, path: '', weight: 1, maxFails: 0, failTimeoutMs: 1, check: false, maintenance: false },
    { maxIdle: CONCURRENCY, connectTimeoutMs: 5000, serverTimeoutMs: 50_000, keepAliveMs: 60_000 })
  const head = HEAD(port)
  let started = 0
  let done = 0
  return new Promise((resolve, reject) => {
    const next = (): void => {
      if (started >= REQUESTS) return
      started++
      const ex: Exchange & { requestComplete: boolean } = {
        requestComplete: false,
        onConnected (conn: UpstreamConnection) { conn.write(head); this.requestComplete = true },
        onHead () {},
        onBody () { return true },
        onEnd () { if (++done === REQUESTS) { pool.close(); resolve() } else next() },
        onUpstreamError (code: ErrorCode) { reject(new Error(code)) },
      }
      pool.acquire(ex, false)
    }
    for (let i = 0; i < CONCURRENCY; i++) next()
  })
}

function runUndici (port: number): Promise<void> {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY, pipelining: 1 })
  const headers = ['x-real-ip', '127.0.0.1', 'x-forwarded-for', '127.0.0.1', 'x-forwarded-proto', 'http']
  let started = 0
  let done = 0
  return new Promise((resolve, reject) => {
    const next = (): void => {
      if (started >= REQUESTS) return
      started++
      pool.dispatch({ method: 'GET', path: '/', headers }, {
        onConnect () {},
        onHeaders () { return true },
        onData () { return true },
        onComplete () { if (++done === REQUESTS) { void pool.close(); resolve() } else next() },
        onError (err: Error) { reject(err) },
      })
    }
    for (let i = 0; i < CONCURRENCY; i++) next()
  })
}

async function measure (fn: (port: number) => Promise<void>, port: number): Promise<number> {
  const c0 = process.cpuUsage()
  await fn(port)
  const c = process.cpuUsage(c0)
  return (c.user + c.system) / REQUESTS
}

async function main (): Promise<void> {
  startClock()
  const child = fork(fileURLToPath(import.meta.url), ['backend'])
  const port = await new Promise<number>((r) => child.once('message', (p) => r(p as number)))
  await runOurs(port) // warm-up both
  await runUndici(port)
  const rows: string[] = []
  const ratios: number[] = []
  for (let r = 1; r <= ROUNDS; r++) {
    const ours = await measure(runOurs, port)
    const undici = await measure(runUndici, port)
    ratios.push(undici / ours)
    rows.push(`| ${r} | ${ours.toFixed(2)} | ${undici.toFixed(2)} | ${(undici / ours).toFixed(2)} |`)
  }
  ratios.sort((a, b) => a - b)
  console.log(`${REQUESTS} requests per run, ${CONCURRENCY} concurrent, keep-alive, 16-byte responses; client CPU µs per request\n`)
  console.log('| round | node:net pool (ours) | undici 7 Pool.dispatch | undici / ours |\n|---:|---:|---:|---:|')
  console.log(rows.join('\n'))
  console.log(`\nmedian undici/ours: ${ratios[Math.floor(ratios.length / 2)]!.toFixed(2)}`)
  child.kill()
}
