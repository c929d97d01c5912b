// Small client messages toward a server share one staging buffer per worker
// (core/worker/ws/frame-staging.ts) and leave in one write per socket per
// turn. What must hold whatever the server does: every message arrives whole
// and in order, also when the server stops reading (lb's writes then wait in
// its socket, so the bytes they point at must not be written over by later
// turns) and when several clients' messages share the buffer; and a close
// frame never overtakes the messages sent before it.
import { strict as assert } from 'node:assert'
import { once } from 'node:events'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import type { WebSocket } from 'ws'
import { type Lb, settledRss, sleep, startLb, waitFor } from '../helpers.js'
import { OP_BINARY, OP_CLOSE, closePayload, encodeFrame } from '../../core/worker/ws/ws-frame.js'
import { type WsEcho, connect, startWsEcho } from './echo.js'

const CLIENTS = 2
const MESSAGES = 40000
/** under the staging limit (255 payload bytes): every message here is staged */
const SIZE = 200

/** message `seq` of client `id`: both numbers, then bytes that depend on both, so a message written over shows */
function message (id: number, seq: number): Buffer {
  const m = Buffer.alloc(SIZE)
  m.writeUInt32BE(id, 0)
  m.writeUInt32BE(seq, 4)
  for (let i = 8; i < SIZE; i++) m[i] = (id * 31 + seq * 7 + i) & 0xff
  return m
}

describe('WebSocket: small messages staged for the server', () => {
  let stalling: WsEcho, recorder: WsEcho, deaf: WsEcho, lb: Lb
  /** per server-side connection: the messages it got, checked as they come; the first problem seen */
  const seen = new Map<number, number>()
  let problem = ''
  const events: string[] = []

  before(async () => {
    // reads nothing for 1.5 s after the upgrade, then checks every message: client id, sequence, content
    stalling = await startWsEcho('stalling', {
      onConnection: (ws) => {
        const sock = (ws as unknown as { _socket: { pause (): void, resume (): void } })._socket
        sock.pause()
        setTimeout(() => sock.resume(), 1500)
        ws.on('message', (d: Buffer) => {
          const id = d.readUInt32BE(0)
          const seq = d.readUInt32BE(4)
          const want = seen.get(id) ?? 0
          if (problem === '' && (seq !== want || !d.equals(message(id, seq)))) problem = `client ${id}: got message ${seq} (${d.length} bytes), expected ${want} intact`
          seen.set(id, want + 1)
        })
      },
    })
    // records messages and the close, in order
    recorder = await startWsEcho('recorder', {
      onConnection: (ws) => {
        ws.on('message', (d: Buffer) => events.push(`m${d.readUInt32BE(4)}`))
        ws.on('close', (code: number) => events.push(`close:${code}`))
      },
    })
    // never reads
    deaf = await startWsEcho('deaf', { onConnection: (ws) => (ws as unknown as { _socket: { pause (): void } })._socket.pause() })
    // V8's memory reducer gives back 20-30 MB over the tiny-messages test's 10 s (after the fill), which hid what it
    // measures: off, lb's resident memory only moves with what it keeps
    lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.stalling]
rule = "PathPrefix(\`/stalling\`)"
service = "stalling"
[routers.recorder]
rule = "PathPrefix(\`/recorder\`)"
service = "recorder"
[services.stalling]
[[services.stalling.servers]]
address = "${stalling.address}"
check = false
[routers.deaf]
rule = "PathPrefix(\`/deaf\`)"
service = "deaf"
[services.recorder]
[[services.recorder.servers]]
address = "${recorder.address}"
check = false
[services.deaf]
[[services.deaf.servers]]
address = "${deaf.address}"
check = false
`, { nodeArgs: ['--no-memory-reducer'] })
  })
  after(async () => {
    await lb.stop()
    await stalling.close()
    await recorder.close()
    await deaf.close()
  })

  test('several clients to a server that stops reading: every message arrives whole and in order', async () => {
    const clients: WebSocket[] = []
    for (let id = 0; id < CLIENTS; id++) clients.push(await connect(`ws://127.0.0.1:${lb.port}/stalling`))
    // in bursts, one per turn of the test's loop, interleaved between clients: lb stages them over many turns,
    // and 8 MB a client is more than loopback's socket buffers take while the server does not read
    for (let seq = 0; seq < MESSAGES; seq += 50) {
      for (let id = 0; id < CLIENTS; id++) for (let k = seq; k < seq + 50; k++) clients[id]!.send(message(id, k))
      await sleep(1)
    }
    await waitFor(() => problem !== '' || [...seen.values()].reduce((a, b) => a + b, 0) === CLIENTS * MESSAGES,
      'every message at the server', 20_000, 20)
    assert.equal(problem, '')
    for (let id = 0; id < CLIENTS; id++) assert.equal(seen.get(id), MESSAGES, `client ${id}`)
    for (const ws of clients) ws.close()
  })

  test('a close sent right after messages reaches the server after them', async () => {
    // a raw client: 100 messages and the close in one write, so lb reads them in one turn
    const sock = net.connect(lb.port, '127.0.0.1')
    await once(sock, 'connect')
    sock.write('GET /recorder HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n')
    let head = '' // it may come in pieces
    sock.on('data', (d: Buffer) => { head += d.toString('latin1') })
    await waitFor(() => head.includes('\r\n\r\n'), 'the answer to the upgrade', 5000, 5)
    assert.match(head, /^HTTP\/1\.1 101 /)
    const frames = Array.from({ length: 100 }, (_, k) => encodeFrame(OP_BINARY, message(9, k)))
    sock.write(Buffer.concat([...frames, encodeFrame(OP_CLOSE, closePayload(1000, new Uint8Array(0)))]))
    await waitFor(() => events.includes('close:1000'), 'the server to see the close', 5000, 10)
    assert.deepEqual(events, [...Array.from({ length: 100 }, (_, k) => `m${k}`), 'close:1000'])
    sock.destroy()
  })

  test('tiny messages, one a turn, to a server that reads nothing: each waits in a buffer of its own size', async () => {
    const ws = await connect(`ws://127.0.0.1:${lb.port}/deaf`)
    // 16 MB of small messages fill the loopback socket buffers toward the server: lb's writes to it wait from then on
    // (small ones: a big message's copies in uWS and lb leave memory that comes back slowly, and hides what is measured)
    for (let i = 0; i < 80_000; i += 1000) {
      for (let k = i; k < i + 1000; k++) ws.send(message(7, k))
      await sleep(1)
    }
    // one 16-byte message per turn of lb's loop: a staging buffer per message would stay with the server's socket
    const tiny = async (from: number, n: number): Promise<void> => {
      for (let i = from; i < from + n; i++) {
        ws.send(message(7, i).subarray(0, 16))
        await sleep(1)
      }
    }
    await tiny(0, 1000)
    const before = await settledRss(lb.proc.pid!)
    await tiny(1000, 8000)
    const grown = await settledRss(lb.proc.pid!) - before
    assert.equal(ws.readyState, ws.OPEN)
    assert.ok(grown < 10, `lb's resident memory grew ${grown.toFixed(1)} MB for 128 KB of messages`)
    ws.terminate()
  })
})
