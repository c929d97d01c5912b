// WebSocket load for bench/e2e/tls-ws.ts: CONNS client WebSockets (the `ws`
// package) each keep WINDOW messages of SIZE bytes in flight against an echo
// server; counts echoed messages over SECS after a 1 s warm-up and prints one
// JSON line {"msgs": n, "secs": s, "msgs_per_s": r}. Masks are all-zero
// (ws's generateMask option): the client should cost as little as possible.
//
//   node dist/bench/e2e/ws-load.js URL CONNS WINDOW SIZE SECS
import { WebSocket } from 'ws'

const [url = 'ws://127.0.0.1:9131/ws', conns = '32', window = '16', size = '64', secs = '10'] = process.argv.slice(2)
const payload = Buffer.alloc(Number(size), 0x61)
let counting = false
let count = 0
const sockets: WebSocket[] = []

for (let i = 0; i < Number(conns); i++) {
  const ws = new WebSocket(url, { rejectUnauthorized: false, perMessageDeflate: false, generateMask: (m: Buffer) => { m.fill(0) } })
  sockets.push(ws)
  ws.on('open', () => { for (let k = 0; k < Number(window); k++) ws.send(payload) })
  ws.on('message', () => {
    if (counting) count++
    ws.send(payload)
  })
  ws.on('error', (err) => {
    process.stderr.write(`ws-load: ${err.message}\n`)
    process.exit(1)
  })
}

setTimeout(() => {
  counting = true
  const t0 = performance.now()
  setTimeout(() => {
    counting = false
    const s = (performance.now() - t0) / 1000
    process.stdout.write(JSON.stringify({ msgs: count, secs: s, msgs_per_s: Math.round(count / s) }) + '\n')
    for (const ws of sockets) ws.terminate()
    process.exit(0)
  }, Number(secs) * 1000)
}, 1000)
