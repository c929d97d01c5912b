// A real WebSocket server for the tests: the `ws` package on a node:http
// server on 127.0.0.1. It echoes every message (same type), answers the text
// message "name?" with its name, and records what it saw: upgrade request
// headers, pings, close codes. Plain HTTP requests get "<name>\n".
import http from 'node:http'
import type net from 'node:net'
import { type WebSocket, WebSocketServer } from 'ws'

export interface WsEcho {
  readonly port: number
  readonly address: string
  /** headers of every upgrade request, in order */
  readonly upgrades: http.IncomingHttpHeaders[]
  /** open and closed server-side sockets, in order */
  readonly sockets: WebSocket[]
  /** "ping:<payload>", "pong:<payload>", "close:<code>:<reason>" as they happen */
  readonly events: string[]
  close (): Promise<void>
}

export interface WsEchoOptions {
  /** replaces the echo behaviour for each connection */
  onConnection?: (ws: WebSocket, req: http.IncomingMessage) => void
  /** answer upgrades with this status instead of 101 */
  refuse?: number
  /** subprotocols the server accepts (first one the client offers wins) */
  protocols?: string[]
}

export async function startWsEcho (name: string, opts: WsEchoOptions = {}, port = 0): Promise<WsEcho> {
  const server = http.createServer((req, res) => {
    req.resume()
    res.end(`${name}\n`)
  })
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 256 * 1024 * 1024,
    handleProtocols: (offered) => opts.protocols?.find((p) => offered.has(p)) ?? false,
  })
  const e: WsEcho = {
    port: 0,
    address: '',
    upgrades: [],
    sockets: [],
    events: [],
    close: () => new Promise((resolve) => {
      for (const s of e.sockets) s.terminate()
      wss.close()
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    e.upgrades.push(req.headers)
    if (opts.refuse !== undefined) {
      socket.end(`HTTP/1.1 ${opts.refuse} Refused\r\ncontent-type: text/plain\r\ncontent-length: 8\r\nx-refused-by: ${name}\r\n\r\nrefused\n`)
      return
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      e.sockets.push(ws)
      ws.on('ping', (d) => e.events.push(`ping:${d.toString()}`))
      ws.on('pong', (d) => e.events.push(`pong:${d.toString()}`))
      ws.on('close', (code, reason) => e.events.push(`close:${code}:${reason.toString()}`))
      ws.on('error', () => undefined)
      if (opts.onConnection !== undefined) {
        opts.onConnection(ws, req)
        return
      }
      ws.on('message', (data, isBinary) => {
        if (!isBinary && data.toString() === 'name?') ws.send(name)
        else ws.send(data, { binary: isBinary })
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  const p = (server.address() as net.AddressInfo).port
  Object.assign(e, { port: p, address: `127.0.0.1:${p}` })
  return e
}

/** Opens a client WebSocket; resolves once open (rejects on an unexpected response, with its status). */
export function connect (url: string, opts: ConstructorParameters<typeof import('ws').WebSocket>[2] = {}, protocols: string[] = []): Promise<WebSocket> {
  return import('ws').then(({ WebSocket: Ws }) => new Promise((resolve, reject) => {
    const ws = new Ws(url, protocols, { maxPayload: 256 * 1024 * 1024, ...opts })
    ws.once('open', () => resolve(ws))
    ws.once('unexpected-response', (_req, res) => {
      reject(Object.assign(new Error(`unexpected response ${res.statusCode}`), { status: res.statusCode, headers: res.headers }))
      ws.terminate()
    })
    ws.once('error', reject)
  }))
}

/** The next message on `ws`, as a Buffer with its type; rejects, naming the close code, if `ws` closes first. */
export function nextMessage (ws: WebSocket): Promise<{ data: Buffer, binary: boolean }> {
  return new Promise((resolve, reject) => {
    const onClose = (code: number): void => reject(new Error(`the WebSocket closed (${code}) before the next message`))
    if (ws.readyState === ws.CLOSED) onClose(-1)
    ws.once('close', onClose)
    ws.once('message', (data, binary) => {
      ws.off('close', onClose)
      resolve({ data: data as Buffer, binary })
    })
  })
}

/** Resolves with the close code and reason once `ws` is closed. */
export function closed (ws: WebSocket): Promise<{ code: number, reason: string }> {
  return new Promise((resolve) => {
    if (ws.readyState === ws.CLOSED) resolve({ code: -1, reason: 'already closed' })
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }))
  })
}
