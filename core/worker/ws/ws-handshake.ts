// The WebSocket opening handshake as the proxy sees it (RFC 6455 §4): the
// client's key is checked, the upgrade request forwarded to the server is
// built, and the head of the server's answer is read: a valid 101 (its
// Sec-WebSocket-Accept matches the key), another status (relayed to the client
// as an ordinary HTTP response), or an invalid answer.
import { createHash } from 'node:crypto'
import net from 'node:net'
import type { Ctx } from '../request/context.js'
import { forwardHead } from '../proxy/forward-head.js'

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
const KEY = /^[A-Za-z0-9+/]{22}==$/
// request headers never forwarded: hop-by-hop, the ones set here, and extensions (never negotiated)
const DROP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade',
  'x-real-ip', 'x-forwarded-for', 'x-forwarded-proto', 'sec-websocket-extensions', 'content-length'])
const dropRequestHeader = (k: string): boolean => DROP.has(k)
// headers of the server's 101 that uWS writes itself or that must not reach the client
const DROP_101 = new Set(['connection', 'upgrade', 'sec-websocket-accept', 'sec-websocket-extensions', 'sec-websocket-protocol',
  'keep-alive', 'transfer-encoding', 'content-length', 'date'])
const NONE: string[] = []

/** The client's Sec-WebSocket-Key is 16 bytes in base64, and its Sec-WebSocket-Version 13. */
export function validHandshake (ctx: Ctx, key: string): boolean {
  return KEY.test(key) && ctx.header('sec-websocket-version') === '13'
}

/** The upgrade request as it goes to the server: always a GET, without extensions. */
export function upgradeRequestHead (ctx: Ctx, hostFallback: string): string {
  return forwardHead(ctx, 'GET', dropRequestHeader, hostFallback, 'connection: Upgrade\r\nupgrade: websocket\r\n')
}

export interface UpgradeAnswer {
  readonly status: number
  /** a 101's headers for the client, flat [name, value, ...] (none for another status) */
  readonly headers: string[]
  /** the subprotocol the server chose, '' for none */
  readonly protocol: string
}

/**
 * Reads the head of the server's answer (UTF-8 text up to the blank line, as
 * uWS writes it back: see response-parser.ts). Null when it is not HTTP, or a
 * 101 that does not accept this key's WebSocket.
 */
export function readUpgradeAnswer (head: string, key: string): UpgradeAnswer | null {
  const lines = head.split('\r\n')
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)
  if (m === null) return null
  if (m[1] !== '101') return { status: Number(m[1]), headers: NONE, protocol: '' }
  const headers: string[] = []
  let accept = ''
  let upgrade = ''
  let protocol = ''
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const name = line.slice(0, colon)
    const value = line.slice(colon + 1).trim()
    const lower = name.toLowerCase()
    if (lower === 'sec-websocket-accept') accept = value
    else if (lower === 'upgrade') upgrade = value.toLowerCase()
    else if (lower === 'sec-websocket-protocol') protocol = value
    if (!DROP_101.has(lower)) headers.push(name, value)
  }
  if (upgrade !== 'websocket' || accept !== createHash('sha1').update(key + GUID).digest('base64')) return null
  return { status: 101, headers, protocol }
}

/**
 * Opens a WebSocket to this thread's own loopback `port` (the cork anchor of
 * core/worker/transport/uws/cork-anchor.ts): the handshake, then the 101 and nothing else, read and
 * dropped. `done` runs when the connection fails or closes. It never keeps the
 * thread alive.
 */
export function dialSelf (port: number, done: () => void): void {
  const sock = net.connect(port, '127.0.0.1', () => {
    sock.write('GET / HTTP/1.1\r\nhost: anchor\r\nupgrade: websocket\r\nconnection: Upgrade\r\n' +
      'sec-websocket-key: bGItY29yay1hbmNob3IhIQ==\r\nsec-websocket-version: 13\r\n\r\n')
  })
  sock.unref()
  sock.on('error', done)
  sock.on('close', done)
  sock.resume()
}
