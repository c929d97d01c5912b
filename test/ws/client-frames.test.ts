// Client frames that break RFC 6455, through the real balancer
// (2 workers) to a real `ws` server, with raw sockets: an unmasked client frame,
// and a new data frame inside an unfinished fragmented message. uWS parses
// client frames itself, before lb sees them (README "Request forms at the edge" says
// what this build does and cannot do); these tests pin what lb does: the
// broken frames never reach the server, the broken session ends, and another
// session on the same balancer goes on unaffected.
import { strict as assert } from 'node:assert'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type Lb, simpleConfig, startLb } from '../helpers.js'
import type { WebSocket } from 'ws'
import { type WsEcho, connect, nextMessage, startWsEcho } from './echo.js'

/** One client frame; `mask` false sends the payload in clear, which a client must never do (RFC 6455 §5.1). */
function frame (opcode: number, payload: string, fin: boolean, mask: boolean): Buffer {
  const p = Buffer.from(payload)
  const key = Buffer.from([0x11, 0x22, 0x33, 0x44])
  const body = mask ? Buffer.from(p.map((b, i) => b ^ key[i % 4]!)) : p
  return Buffer.concat([Buffer.from([(fin ? 0x80 : 0) | opcode, (mask ? 0x80 : 0) | p.length]), mask ? key : Buffer.alloc(0), body])
}

/**
 * A well-behaved session beside the broken one: it talks every 200 ms (the
 * idle time-out is 1 s here); `check` proves it still echoes, then closes it.
 */
async function bystander (port: number): Promise<{ check: () => Promise<void> }> {
  const ws: WebSocket = await connect(`ws://127.0.0.1:${port}/ws`)
  const timer = setInterval(() => ws.send('tick'), 200)
  return {
    check: async () => {
      clearInterval(timer)
      ws.send('still here')
      for (;;) if ((await nextMessage(ws)).data.toString() === 'still here') break
      ws.close()
    },
  }
}

interface RawSession {
  /** bytes from the balancer after the 101 head */
  readonly frames: Buffer
  readonly closed: boolean
  readonly ms: number
}

/** Upgrades a raw connection, writes `frames`, and reads until the balancer closes (or `ms`). */
function rawSession (port: number, frames: Buffer[], ms: number): Promise<RawSession> {
  return new Promise((resolve) => {
    const t0 = Date.now()
    const s = net.connect(port, '127.0.0.1', () => s.write('GET /ws HTTP/1.1\r\nhost: a\r\nupgrade: websocket\r\nconnection: Upgrade\r\n' +
      'sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n'))
    let buf = Buffer.alloc(0)
    let opened = -1
    const done = (closed: boolean): void => {
      clearTimeout(timer)
      s.destroy()
      resolve({ frames: opened < 0 ? Buffer.alloc(0) : buf.subarray(opened), closed, ms: Date.now() - t0 })
    }
    const timer = setTimeout(() => done(false), ms)
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d])
      if (opened >= 0) return
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) return
      assert.match(buf.subarray(0, 12).toString(), /^HTTP\/1\.1 101/)
      opened = end + 4
      for (const f of frames) s.write(f)
    })
    s.on('close', () => done(true))
    s.on('error', () => undefined)
  })
}

describe('WebSocket client frames that break the protocol', () => {
  let echo: WsEcho, lb: Lb
  before(async () => {
    echo = await startWsEcho('e1')
    lb = await startLb(simpleConfig([echo.address], '', '[timeouts]\ntunnel = "1s"\n'))
  })
  after(async () => { await lb.stop(); await echo.close() })

  test('a new data frame inside an unfinished fragmented message ends that session only', async () => {
    const good = await bystander(lb.port)
    const before = echo.sockets.length
    const r = await rawSession(lb.port, [frame(1, 'frag', false, true), frame(1, 'new', true, true)], 3000)
    assert.ok(r.closed && r.ms < 2000, 'closed at once')
    // uWS closes the TCP connection without a close frame (no 1002: a limit of this build); nothing was echoed
    assert.equal(r.frames.length, 0, r.frames.toString('hex'))
    // the session's server side is closed too
    const server = echo.sockets[before]!
    for (const end = Date.now() + 2000; server.readyState !== server.CLOSED && Date.now() < end;) await new Promise((res) => setTimeout(res, 20))
    assert.equal(server.readyState, server.CLOSED)
    // the other session goes on
    await good.check()
  })

  test('an unmasked client frame is never delivered; the session ends by the idle time-out, others unaffected', async () => {
    const good = await bystander(lb.port)
    const r = await rawSession(lb.port, [frame(1, 'clear', true, false)], 4000)
    // uWS reads the frame as masked and waits for a mask it never gets: nothing reaches the server
    // (no echo), and the tunnel's idle time-out (1 s here) closes the session with 1001
    assert.ok(r.closed, 'closed')
    assert.ok(!r.frames.includes(Buffer.from('clear')), 'the unmasked payload was delivered and echoed')
    assert.equal(r.frames[0], 0x88, `a close frame, got ${r.frames.toString('hex')}`)
    assert.equal(r.frames.readUInt16BE(2), 1001)
    await good.check()
  })
})
