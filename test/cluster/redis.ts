// A real redis-server for the cluster tests: loopback, a free port, its own
// temporary folder, no persistence; stopped (or SIGKILLed) by its PID. And
// real redis-sentinel processes watching one, for the failover tests.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { freePort, sleep, tempDir } from '../helpers.js'

export interface RedisServer {
  readonly port: number
  readonly url: string
  /** a client for the test's own look at Redis */
  client (): Redis
  /** SIGKILL: Redis dies at once, with everything it held */
  kill (): Promise<void>
  /** SIGSTOP / SIGCONT: Redis freezes (its connections stay open, nothing is answered) and thaws */
  pause (): void
  resume (): void
  /** starts it again on the same port (empty: no persistence) */
  restart (): Promise<void>
  stop (): Promise<void>
}

/** The redis-server binary; a missing one fails the tests (the test command installs it: test/tools.sh). */
export function redisBinary (): string {
  try {
    return execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim()
  } catch {
    throw new Error('redis-server is not installed and the test command could not install it (apt-get install -y redis-server as root)')
  }
}

/** `extra`: more redis-server arguments (TLS, ACL users...); the plain port stays for the test's own client. */
export async function startRedis (bin: string, port?: number, extra: readonly string[] = []): Promise<RedisServer> {
  const p = port ?? await freePort()
  const dir = tempDir('lb-redis-')
  return serve(bin, p, ['--port', String(p), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning', ...extra])
}

/** The redis-sentinel binary, or null (the caller skips with the reason; the test command installs it: test/tools.sh). */
export function sentinelBinary (): string | null {
  try {
    return execFileSync('sh', ['-c', 'command -v redis-sentinel'], { encoding: 'utf8' }).trim()
  } catch {
    return null
  }
}

/**
 * A redis-sentinel monitoring the master at `masterPort` as `name` (quorum
 * `quorum`), judging it down after `downAfterMs`. Sentinel rewrites its
 * configuration file: it lives in the sentinel's own temporary folder.
 */
export async function startSentinel (bin: string, masterPort: number, name: string, quorum: number, downAfterMs: number): Promise<RedisServer> {
  const p = await freePort()
  const dir = tempDir('lb-sentinel-')
  const conf = join(dir, 'sentinel.conf')
  writeFileSync(conf, [
    `port ${p}`, 'bind 127.0.0.1', 'daemonize no', `dir ${dir}`, 'loglevel warning',
    `sentinel monitor ${name} 127.0.0.1 ${masterPort} ${quorum}`,
    `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
    `sentinel failover-timeout ${name} ${Math.max(1000, 4 * downAfterMs)}`,
    `sentinel parallel-syncs ${name} 1`,
    '',
  ].join('\n'))
  return serve(bin, p, [conf])
}

/** Runs `bin args` until it answers PING on `p`; the handle stops it by its PID. */
async function serve (bin: string, p: number, args: readonly string[]): Promise<RedisServer> {
  let proc: ChildProcess | null = null
  const clients: Redis[] = []
  const launch = async (): Promise<void> => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    proc = child
    let out = ''
    child.stdout!.on('data', (d: Buffer) => { out += d.toString() })
    child.stderr!.on('data', (d: Buffer) => { out += d.toString() })
    // ready when it answers PING
    for (const end = Date.now() + 10_000; ;) {
      if (child.exitCode !== null) throw new Error(`redis-server exited: ${out}`)
      const c = new Redis({ port: p, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
      c.on('error', () => {})
      try {
        await c.connect()
        if (await c.ping() === 'PONG') { c.disconnect(); return }
      } catch {}
      c.disconnect()
      if (Date.now() > end) throw new Error(`redis-server did not start: ${out}`)
      await sleep(20)
    }
  }
  const kill = async (signal: NodeJS.Signals): Promise<void> => {
    const child = proc
    if (child === null || child.exitCode !== null || child.signalCode !== null) return
    const gone = new Promise((resolve) => child.once('exit', resolve))
    process.kill(child.pid!, 'SIGCONT') // a paused one would not act on SIGTERM
    process.kill(child.pid!, signal)
    await gone
  }
  const signal = (s: NodeJS.Signals): void => {
    if (proc !== null && proc.exitCode === null && proc.signalCode === null) process.kill(proc.pid!, s)
  }
  await launch()
  return {
    port: p,
    url: `redis://127.0.0.1:${p}`,
    client: () => {
      const c = new Redis({ port: p, host: '127.0.0.1' })
      c.on('error', () => {})
      clients.push(c)
      return c
    },
    kill: () => kill('SIGKILL'),
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    restart: launch,
    stop: async () => {
      for (const c of clients) c.disconnect()
      await kill('SIGTERM')
    },
  }
}
