// A request written by hand (any method, any path bytes, any body) for the
// management surfaces, sent with one raw exchange.
import { type Exchange, exchange } from './raw-client.js'

export function rawRequest (method: string, path: string, body: string | null): Buffer {
  const b = body === null ? '' : body
  const head = `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n` +
    (body === null ? '' : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b, 'latin1')}\r\n`) + '\r\n'
  return Buffer.from(head + b, 'latin1')
}

export function send (port: number, bytes: Buffer, timeoutMs: number): Promise<Exchange> {
  return exchange(port, bytes, { expect: 1, timeoutMs })
}
