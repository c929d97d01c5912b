// The floor of a WebSocket relay on lb's stack, for bench/e2e/tls-ws.ts: uWS's
// SSLApp in (it parses and unmasks client frames, frames what is sent), node:net
// out to the echo backend, and nothing else. One thread. Client messages are
// masked (a random key per connection) into a frame each and written at the
// end of the loop turn, one writev per server socket per turn (as lb does);
// server frames are read into one buffer (net onread) and sent to the client as
// they are parsed, in one cork. No routing, limits, fragments, pings, close
// codes or stats: a yardstick, not a proxy. lb's cost above it is what lb's
// WebSocket features cost; its own cost is what any relay on uWS and node:net pays.
//
//   node dist/bench/e2e/floor-ws.js PORT BACKEND_PORT CERT KEY
import { randomBytes } from 'node:crypto'
import net from 'node:net'
import { loadUws } from '../../core/worker/transport/uws/native.js'

const [port, backendPort, cert, key] = process.argv.slice(2)
const uws = loadUws()
const READ = Buffer.allocUnsafe(64 * 1024)

interface Ws { send (m: Uint8Array, binary: boolean): unknown, cork (cb: () => void): unknown, end (): void }

class Link {
  ws: Ws | null = null
  readonly mask = randomBytes(4)
  /** bytes of a server frame not complete at the end of a read */
  rest: Buffer | null = null
  corked = false
  readonly socket: net.Socket

  constructor (socket: net.Socket) { this.socket = socket }

  /** A masked frame of `m` to the server, in this turn's writev. */
  toServer (m: ArrayBuffer, binary: boolean): void {
    const p = new Uint8Array(m)
    const n = p.length
    const h = n < 126 ? 2 : 4
    const f = Buffer.allocUnsafe(h + 4 + n)
    f[0] = binary ? 0x82 : 0x81
    if (n < 126) f[1] = 0x80 | n
    else { f[1] = 0x80 | 126; f.writeUInt16BE(n, 2) }
    const k = this.mask
    f[h] = k[0]!; f[h + 1] = k[1]!; f[h + 2] = k[2]!; f[h + 3] = k[3]!
    for (let i = 0; i < n; i++) f[h + 4 + i] = p[i]! ^ k[i & 3]!
    if (!this.corked) {
      this.corked = true
      this.socket.cork()
      turnQueue.push(this)
      if (turnQueue.length === 1) setImmediate(endTurn)
    }
    this.socket.write(f)
  }

  /** Server frames (unmasked, unfragmented) in `buf` to the client; an incomplete last one waits for more. */
  fromServer (buf: Buffer): void {
    const ws = this.ws
    if (ws === null) return
    let at = 0
    ws.cork(() => {
      for (;;) {
        if (buf.length - at < 2) break
        let len = buf[at + 1]! & 0x7f
        let p = at + 2
        if (len === 126) {
          if (buf.length - at < 4) break
          len = buf.readUInt16BE(at + 2)
          p = at + 4
        }
        if (buf.length < p + len) break
        const op = buf[at]! & 0x0f
        if (op === 1 || op === 2) ws.send(buf.subarray(p, p + len), op === 2)
        at = p + len
      }
    })
    this.rest = at === buf.length ? null : Buffer.from(buf.subarray(at))
  }
}

const turnQueue: Link[] = []
function endTurn (): void {
  for (const l of turnQueue) {
    l.corked = false
    l.socket.uncork()
  }
  turnQueue.length = 0
}

uws.SSLApp({ cert_file_name: cert!, key_file_name: key! }).ws<{ link: Link }>('/*', {
  maxPayloadLength: 16 * 1024 * 1024,
  idleTimeout: 0,
  upgrade: (res, req, context) => {
    const wsKey = req.getHeader('sec-websocket-key')
    const protocol = req.getHeader('sec-websocket-protocol')
    const extensions = req.getHeader('sec-websocket-extensions')
    const url = req.getUrl()
    let aborted = false
    let link: Link | null = null
    // every read lands in READ (net onread): no Buffer per read
    const onread = {
      buffer: READ,
      callback: (n: number): boolean => {
        if (link!.ws !== null) {
          link!.fromServer(link!.rest === null ? READ.subarray(0, n) : Buffer.concat([link!.rest, READ.subarray(0, n)]))
          return true
        }
        // the 101 arrives alone: the echo server writes nothing before the client's first frame
        if (aborted) return false
        if (!READ.toString('latin1', 0, 12).includes(' 101')) { res.cork(() => res.writeStatus('502 Bad Gateway').end()); socket.destroy(); return false }
        res.cork(() => res.upgrade({ link }, wsKey, protocol, extensions, context))
        return true
      },
    }
    const socket = net.connect({ port: Number(backendPort), host: '127.0.0.1', noDelay: true, onread } as net.NetConnectOpts)
    link = new Link(socket)
    res.onAborted(() => { aborted = true; socket.destroy() })
    socket.on('error', () => link!.ws?.end())
    socket.on('close', () => link!.ws?.end())
    socket.once('connect', () => {
      socket.write(`GET ${url} HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-version: 13\r\nsec-websocket-key: ${wsKey}\r\n\r\n`)
    })
  },
  open: (ws) => { ws.getUserData().link.ws = ws },
  message: (ws, m, binary) => ws.getUserData().link.toServer(m, binary),
  close: (ws) => { const l = ws.getUserData().link; l.ws = null; l.socket.destroy() },
}).listen('127.0.0.1', Number(port), (token) => {
  if (token === false) {
    console.error(`floor-ws: cannot listen on 127.0.0.1:${port}`)
    process.exit(1)
  }
})
