// A real redis-server for the cluster tests: loopback, a free port, its own
// temporary folder, no persistence; stopped (or SIGKILLed) by its PID.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { Redis } from 'ioredis'
import { freePort, sleep, tempDir } from '../helpers.js'

export interface RedisServer {
  readonly port: number
  readonly url: string
  /** a client for the test's own look at Redis */
  client (): Redis
  /** SIGKILL: Redis dies at once, with everything it held */
  kill (): Promise<void>
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
  let proc: ChildProcess | null = null
  const clients: Redis[] = []
  const launch = async (): Promise<void> => {
    const child = spawn(bin, ['--port', String(p), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] })
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
    process.kill(child.pid!, signal)
    await gone
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
    restart: launch,
    stop: async () => {
      for (const c of clients) c.disconnect()
      await kill('SIGTERM')
    },
  }
}
