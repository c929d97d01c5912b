// Raw HTTP/1.1 on both sides of the balancer, for tests of what exactly goes
// over the wire: a backend that records every byte it receives and answers
// each request head with a scripted response, and a client that writes bytes
// as given (no library cleans them up) and reads one answer.
import net from 'node:net'

export interface RawBackend {
  readonly port: number
  readonly address: string
  /** every byte received so far, all connections, latin1 */
  received (): string
  /** the request heads received, in order (without the final CRLF CRLF) */
  readonly heads: string[]
  close (): Promise<void>
}

/** `answer` gets each request head and returns the raw response to write. */
export async function startRawBackend (answer: (head: string) => string): Promise<RawBackend> {
  let all = ''
  const heads: string[] = []
  const sockets = new Set<net.Socket>()
  const server = net.createServer((s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
    s.on('error', () => {})
    let buf = ''
    let skip = 0 // body bytes of the current request still to come (Content-Length)
    let chunked = false
    s.on('data', (d: Buffer) => {
      const text = d.toString('latin1')
      all += text
      buf += text
      for (;;) {
        if (skip > 0) {
          const n = Math.min(skip, buf.length)
          skip -= n
          buf = buf.slice(n)
          if (skip > 0) return
        }
        if (chunked) {
          const end = buf.indexOf('0\r\n\r\n')
          if (end < 0) return
          buf = buf.slice(end + 5)
          chunked = false
        }
        const end = buf.indexOf('\r\n\r\n')
        if (end < 0) return
        const head = buf.slice(0, end)
        buf = buf.slice(end + 4)
        heads.push(head)
        const cl = /\r\ncontent-length: *(\d+)/i.exec(head)
        skip = cl === null ? 0 : Number(cl[1])
        chunked = /\r\ntransfer-encoding: *chunked/i.test(head)
        s.write(answer(head))
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as net.AddressInfo).port
  return {
    port,
    address: `127.0.0.1:${port}`,
    received: () => all,
    heads,
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    }),
  }
}

/** The answer to a 200 with a short body. */
export const OK = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'

export interface RawResponse {
  readonly status: number
  /** the head as sent, status line included, without the final CRLF CRLF */
  readonly head: string
  readonly body: string
}

export interface RawAnswer {
  /** everything read (latin1), interim responses included */
  readonly text: string
  /** the complete final responses read, in order (1xx skipped) */
  readonly responses: RawResponse[]
  /** status of the first final response, 0 when none came */
  readonly status: number
  /** the balancer closed the connection */
  readonly closed: boolean
}

export interface ExchangeOptions {
  /** resolve only once the balancer closed the connection (or after `ms`) */
  readonly waitClose?: boolean
  /** give up after this long (default 3000 ms): resolves with what was read */
  readonly ms?: number
}

/**
 * Writes `bytes` to the balancer on a fresh connection and reads the answer:
 * resolves when the final response is complete (by Content-Length, or without
 * a body), when the balancer closes, or after `ms`. An array is several
 * requests on one connection, each written once the answer to the one before
 * is complete (uWS closes a connection that pipelines while lb is answering).
 */
export function exchange (port: number, bytes: string | Buffer | string[], opts: ExchangeOptions = {}): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const requests = Array.isArray(bytes) ? bytes : [bytes]
    // the answer to a HEAD has no body, whatever its headers say
    const heads = requests.map((r) => r.slice(0, 5).toString() === 'HEAD ')
    let sent = 0
    const sendNext = (): void => {
      const b = requests[sent++]!
      s.write(typeof b === 'string' ? Buffer.from(b, 'latin1') : b)
    }
    const s = net.connect(port, '127.0.0.1', sendNext)
    let text = ''
    let done = false
    const finish = (closed: boolean): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      s.destroy()
      const responses = parseResponses(text, heads)
      resolve({ text, responses, status: responses[0]?.status ?? 0, closed })
    }
    const timer = setTimeout(() => finish(false), opts.ms ?? 3000)
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1')
      const complete = parseResponses(text, heads).length
      if (complete >= requests.length) {
        if (opts.waitClose !== true) finish(false)
      } else if (complete === sent) sendNext()
    })
    s.on('close', () => finish(true))
    s.on('error', () => finish(true))
  })
}

/** The complete final responses in `text`, 1xx skipped; heads[i]: the i-th answers a HEAD. */
export function parseResponses (text: string, heads: readonly boolean[]): RawResponse[] {
  const out: RawResponse[] = []
  let pos = 0
  for (;;) {
    const end = text.indexOf('\r\n\r\n', pos)
    if (end < 0) return out
    const head = text.slice(pos, end)
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0)
    pos = end + 4
    if (status >= 100 && status < 200) continue
    const cl = /\r\ncontent-length: *(\d+)/i.exec(head)
    const len = heads[out.length] === true || status === 204 || status === 304 || cl === null ? 0 : Number(cl[1])
    if (text.length < pos + len) return out
    out.push({ status, head, body: text.slice(pos, pos + len) })
    pos += len
  }
}

/** Writes each chunk in turn (after `before(i)` resolves); resolves with what was read until the close or `ms`. */
export function pipeline (port: number, chunks: string[], before: (i: number) => Promise<void> = async () => {}, ms = 3000): Promise<{ text: string, closed: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    let text = ''
    s.setEncoding('latin1')
    s.on('data', (d: string) => { text += d })
    s.on('error', () => {})
    s.on('connect', async () => { for (const [i, c] of chunks.entries()) { await before(i); s.write(c, 'latin1') } })
    const timer = setTimeout(() => { s.destroy(); resolve({ text, closed: false }) }, ms)
    s.on('close', () => { clearTimeout(timer); resolve({ text, closed: true }) })
  })
}
