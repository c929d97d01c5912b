// WebSocket echo backend for bench/e2e/tls-ws.ts: the upgrade on node:http,
// then frames echoed straight off the socket (unmasked, same opcode), so the
// backend stays cheap next to the proxies being measured. Only what the
// benchmark sends is handled: unfragmented messages, ping, close.
//
//   node dist/bench/e2e/ws-echo-server.js PORT
import { createHash } from 'node:crypto'
import http from 'node:http'
import type net from 'node:net'

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
const port = Number(process.argv[2] ?? 9131)

function echo (sock: net.Socket, head: Buffer): void {
  let pending: Buffer = head
  sock.setNoDelay(true)
  sock.on('data', (d: Buffer) => {
    let buf = pending.length === 0 ? d : Buffer.concat([pending, d])
    const out: Buffer[] = []
    for (;;) {
      if (buf.length < 2) break
      const op = buf[0]! & 0x0f
      let len = buf[1]! & 0x7f
      let p = 2
      if (len === 126) {
        if (buf.length < 4) break
        len = buf.readUInt16BE(2)
        p = 4
      } else if (len === 127) {
        if (buf.length < 10) break
        len = buf.readUInt32BE(6)
        p = 10
      }
      const masked = (buf[1]! & 0x80) !== 0
      if (buf.length < p + (masked ? 4 : 0) + len) break
      const payload = Buffer.from(buf.subarray(p + (masked ? 4 : 0), p + (masked ? 4 : 0) + len))
      if (masked) for (let i = 0; i < len; i++) payload[i]! ^= buf[p + (i & 3)]!
      buf = buf.subarray(p + (masked ? 4 : 0) + len)
      const reply = op === 0x9 ? 0xa : op // ping → pong, close → close, data → same
      const h = len < 126 ? Buffer.from([0x80 | reply, len]) : Buffer.from([0x80 | reply, 126, len >> 8, len & 0xff])
      out.push(h, payload)
      if (op === 0x8) {
        sock.end(Buffer.concat(out))
        return
      }
    }
    pending = buf.length === 0 ? Buffer.alloc(0) : Buffer.from(buf)
    if (out.length > 0) sock.write(Buffer.concat(out)) // one write per read: replies to pipelined messages go together
  })
  sock.on('error', () => sock.destroy())
}

const server = http.createServer((_req, res) => res.end('ws echo\n'))
server.on('upgrade', (req: http.IncomingMessage, sock: net.Socket, head: Buffer) => {
  const key = req.headers['sec-websocket-key'] ?? ''
  const accept = createHash('sha1').update(key + GUID).digest('base64')
  sock.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`)
  echo(sock, head)
})
server.listen(port, '127.0.0.1', () => process.stdout.write(`ws echo on 127.0.0.1:${port}\n`))
process.on('SIGTERM', () => process.exit(0))
