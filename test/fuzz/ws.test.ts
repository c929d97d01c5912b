// Fuzz campaign, surface 2: WebSocket frames from a raw client through lb to
// an echo server. Well-formed messages come back; every protocol error that
// RFC 6455 says fails the connection (unmasked client frame, unknown opcode,
// RSV bits, fragmentation errors, control frames fragmented or over 125
// bytes, lengths over the limit, bad close codes, invalid UTF-8) ends the
// session within the time-out; lb stays up and a session opened before the
// run still echoes after it.
import { rmSync } from 'node:fs'
import net from 'node:net'
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startLb } from '../helpers.js'
import { connect, nextMessage, startWsEcho } from '../ws/echo.js'
import { LbWatch, type Verdict, caseCount, printable, report, runCases } from './lib/campaign.js'
import { type WsCase, wsCase } from './lib/ws-cases.js'

const TIMEOUT = 2000
const UPGRADE = 'GET /ws HTTP/1.1\r\nHost: fuzz.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n'

interface Session { upgraded: boolean, closed: boolean, closeFrame: number | null, received: Buffer, ms: number }

/** Upgrades, sends the case's frames and reads until the session ends, the echo is in, or the time-out. */
function session (port: number, c: WsCase): Promise<Session> {
  return new Promise((resolve) => {
    const started = Date.now()
    const s = net.connect(port, '127.0.0.1', () => s.write(UPGRADE))
    let buf = Buffer.alloc(0)
    let upgraded = false
    let frames = Buffer.alloc(0)
    let done = false
    const finish = (closed: boolean): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      s.destroy()
      // the first frame lb sent: its opcode, and for a close frame its code
      const op = frames.length > 0 ? frames[0]! & 0x0f : -1
      const code = op === 8 ? (frames.length >= 4 ? frames.readUInt16BE(2) : 1005) : null
      resolve({ upgraded, closed, closeFrame: code, received: frames, ms: Date.now() - started })
    }
    const timer = setTimeout(() => finish(false), TIMEOUT)
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d])
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n')
        if (end < 0) return
        if (!buf.subarray(0, 12).toString().startsWith('HTTP/1.1 101')) { finish(true); return }
        upgraded = true
        frames = buf.subarray(end + 4)
        s.write(c.bytes)
      } else frames = Buffer.concat([frames, d])
      if (frames.length > 0 && (frames[0]! & 0x0f) === 8) { finish(false); return }
      if (c.expect === 'echo' && frames.includes(c.echo)) finish(false)
    })
    s.on('error', () => finish(true))
    s.on('close', () => finish(true))
  })
}

test('WebSocket frames: protocol errors end the session, messages come back, lb stays up', async (t) => {
  const echo = await startWsEcho('e1')
  // the bystander stays silent for the whole run: long mode takes longer than the default 50 s idle time-out
  const lb = await startLb(`[timeouts]
tunnel = "1h"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
websocket_max_message = "64k"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[[services.web.servers]]
address = "${echo.address}"
check = false
`)
  t.after(async () => { await lb.stop(); await echo.close(); rmSync(lb.dir, { recursive: true, force: true }) })
  const watch = new LbWatch(lb)
  const bystander = await connect(`ws://127.0.0.1:${lb.port}/bystander`)

  const exec = async (c: WsCase): Promise<Verdict | null> => {
    const r = await session(lb.port, c)
    const got = `${r.upgraded ? 'upgraded' : 'not upgraded'}; ${r.closeFrame !== null ? `close frame ${r.closeFrame}` : r.closed ? 'TCP close' : 'still open'} after ${r.ms} ms; lb sent ${printable(r.received, 80)}`
    if (!r.upgraded) return { check: 'upgrade', expected: '101 Switching Protocols', got }
    if (c.expect === 'echo' && !r.received.includes(c.echo)) return { check: 'echo', expected: 'the message echoed back', got }
    if (c.expect === 'close' && !r.closed && r.closeFrame === null) return { check: 'open', expected: `the session ended (close frame 1002, 1007 or 1009, or TCP close) within ${TIMEOUT} ms`, got }
    if (c.expect === 'close' && r.closeFrame !== null && ![1002, 1007, 1009].includes(r.closeFrame)) return { check: 'close-code', expected: 'close code 1002 (protocol error), 1007 (bad data) or 1009 (too big)', got }
    return null
  }

  report(t, await runCases({
    surface: 'ws',
    count: caseCount(400),
    concurrency: 32,
    generate: wsCase,
    family: (c) => c.family,
    input: (c) => printable(c.bytes, 200),
    bytes: (c) => c.bytes,
    exec,
    watch: () => watch.check(),
  }))
  bystander.send('still there?')
  assert.equal((await nextMessage(bystander)).data.toString(), 'still there?', 'a session opened before the run is unaffected')
  bystander.close()
})
