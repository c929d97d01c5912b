// What the containment of chunked request bodies costs a keep-alive client
// (README, "Chunked request bodies"): lb closes a connection after answering a
// request with a chunked body, so such a client opens a connection per request.
// Same run, alternating rounds: N POSTs of a 1 KiB body through lb over a
// keep-alive agent, with Content-Length, then chunked; prints requests/s and
// lb's CPU per request (from /proc) for each, and their ratio.
//   npm run build && node dist/bench/e2e/chunked-close.js [-n 4000] [-c 8] [-r 5]
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { startLbProc } from './lb-proc.js'

const arg = (name: string, def: number): number => { const i = process.argv.indexOf(name); return i < 0 ? def : Number(process.argv[i + 1]) }
const N = arg('-n', 4000)
const C = arg('-c', 8)
const ROUNDS = arg('-r', 5)
const BODY = Buffer.alloc(1024, 'x')

async function main (): Promise<void> {
  const backend = http.createServer((req, res) => { req.resume(); req.on('end', () => res.end('ok')) })
  backend.keepAliveTimeout = 60_000
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r))
  const lb = await startLbProc(`127.0.0.1:${(backend.address() as AddressInfo).port}`, 2)
  const port = lb.port

  const run = async (chunked: boolean): Promise<{ rps: number, cpuUs: number, conns: number }> => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: C })
    let conns = 0
    const one = (): Promise<void> => new Promise((resolve, reject) => {
      const req = http.request({ port, method: 'POST', path: '/', agent, headers: chunked ? {} : { 'content-length': BODY.length } }, (res) => { res.resume(); res.on('end', resolve) })
      req.on('socket', (s) => { if (!(s as unknown as { counted?: boolean }).counted) { conns++; (s as unknown as { counted: boolean }).counted = true } })
      req.on('error', reject)
      if (chunked) { req.write(BODY.subarray(0, 512)); req.end(BODY.subarray(512)) } else req.end(BODY)
    })
    let left = N
    const c0 = lb.cpu()
    const t0 = process.hrtime.bigint()
    await Promise.all(Array.from({ length: C }, async () => { while (left-- > 0) await one() }))
    const s = Number(process.hrtime.bigint() - t0) / 1e9
    const used = lb.cpu() - c0
    agent.destroy()
    return { rps: N / s, cpuUs: used / N * 1e6, conns }
  }

  await run(false) // warm-up
  await run(true)
  const rows: string[] = []
  const ratios: number[] = []
  for (let r = 0; r < ROUNDS; r++) {
    const a = await run(false)
    const b = await run(true)
    ratios.push(a.cpuUs / b.cpuUs)
    rows.push(`| ${r + 1} | ${a.rps.toFixed(0)} | ${a.cpuUs.toFixed(1)} | ${a.conns} | ${b.rps.toFixed(0)} | ${b.cpuUs.toFixed(1)} | ${b.conns} | ${(b.rps / a.rps).toFixed(2)} |`)
  }
  console.log(`${N} POSTs of 1 KiB, ${C} keep-alive connections at most, lb with 2 workers`)
  console.log('| round | Content-Length req/s | lb CPU µs/req | connections | chunked req/s | lb CPU µs/req | connections | chunked ÷ CL req/s |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|')
  for (const row of rows) console.log(row)
  ratios.sort((x, y) => x - y)
  console.log(`median lb CPU per request, Content-Length ÷ chunked: ${ratios[Math.floor(ratios.length / 2)]!.toFixed(2)}`)
  await lb.stop()
  backend.close()
}

await main()
