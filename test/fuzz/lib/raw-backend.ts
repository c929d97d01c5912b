// A recording backend on raw TCP: it keeps every byte each connection brought,
// so the campaign sees exactly what a proxy forwarded (node:http would reject
// or clean up the very requests that matter). It answers each request head
// with a short 200 and closes: one request per upstream connection, so the
// bytes of one connection are one forwarded request.
import net from 'node:net'

export interface RawBackend {
  readonly port: number
  /** the bytes of every connection so far (latin1), in order of arrival */
  readonly received: string[]
  close (): Promise<void>
}

const ANSWER = 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n'

/** How many body bytes still to come after `head` by its own (loose) framing; -1 = until 0-chunk. */
function bodyLength (head: string): number {
  if (/^transfer-encoding:.*chunked/im.test(head)) return -1
  const cl = /^content-length:\s*(\d+)\s*$/im.exec(head)
  return cl === null ? 0 : Number(cl[1])
}

export async function startRawBackend (): Promise<RawBackend> {
  const received: string[] = []
  const sockets = new Set<net.Socket>()
  const server = net.createServer((s) => {
    sockets.add(s)
    const slot = received.push('') - 1
    let answered = false
    // answer once the head and the body it announces are in; at the latest 200 ms after the last byte
    let idle: NodeJS.Timeout | null = null
    const answer = (): void => {
      if (answered) return
      answered = true
      if (idle !== null) clearTimeout(idle)
      s.end(ANSWER)
    }
    s.on('data', (d: Buffer) => {
      received[slot] += d.toString('latin1')
      const text = received[slot]!
      const end = text.indexOf('\r\n\r\n')
      if (idle !== null) clearTimeout(idle)
      idle = setTimeout(answer, 200)
      if (end < 0) return
      const need = bodyLength(text.slice(0, end))
      const body = text.length - end - 4
      if ((need >= 0 && body >= need) || (need < 0 && /(^|\r\n)0\r\n\r\n$/.test(text.slice(end + 4)))) answer()
    })
    s.on('error', () => undefined)
    s.on('close', () => { sockets.delete(s); if (idle !== null) clearTimeout(idle) })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as net.AddressInfo).port,
    received,
    close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(() => r()) }),
  }
}
