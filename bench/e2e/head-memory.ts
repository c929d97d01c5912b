// What [limits] max_header_bytes costs in memory: lb's resident memory with N
// idle connections, then with N connections each holding an unfinished request
// head just under the limit (a slowloris at the limit: uWS keeps a partial head
// in memory, up to twice the setting), for the default and a large setting.
//   npm run build && node dist/bench/e2e/head-memory.js [-n 1000]
import http from 'node:http'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { startLbProc } from './lb-proc.js'

const i = process.argv.indexOf('-n')
const N = i < 0 ? 1000 : Number(process.argv[i + 1])

/** Opens N connections to `port`, each writing `bytes` of a head that never ends; resolves once written. */
async function hold (port: number, bytes: number): Promise<net.Socket[]> {
  const socks: net.Socket[] = []
  const head = bytes === 0 ? '' : `GET / HTTP/1.1\r\nhost: a\r\ncookie: ${'c'.repeat(bytes - 40)}\r\n`
  for (let k = 0; k < N; k++) {
    const s = net.connect(port, '127.0.0.1')
    s.on('error', () => {})
    await new Promise<void>((resolve) => s.on('connect', () => { if (head === '') resolve(); else s.write(head, () => resolve()) }))
    socks.push(s)
  }
  await sleep(500)
  return socks
}

const backend = http.createServer((_req, res) => res.end('ok'))
await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r))
const address = `127.0.0.1:${(backend.address() as net.AddressInfo).port}`
console.log(`${N} connections, lb with 1 worker; resident memory in MiB`)
console.log('| max_header_bytes | lb alone | + idle connections | + heads of (limit - 100) bytes | per held head, KiB |')
console.log('|---|---:|---:|---:|---:|')
for (const [setting, bytes] of [['16k', 16 * 1024], ['256k', 256 * 1024]] as const) {
  const lb = await startLbProc(address, 1, `[limits]\nmax_header_bytes = "${setting}"\n`)
  await sleep(500)
  const alone = lb.rss()
  const idle = await hold(lb.port, 0)
  const withIdle = lb.rss()
  const heads = await hold(lb.port, bytes - 100)
  const withHeads = lb.rss()
  const mib = (b: number): string => (b / 1048576).toFixed(1)
  console.log(`| ${setting} | ${mib(alone)} | ${mib(withIdle)} | ${mib(withHeads)} | ${((withHeads - withIdle) / N / 1024).toFixed(1)} |`)
  for (const s of [...idle, ...heads]) s.destroy()
  await lb.stop()
}
backend.close()
