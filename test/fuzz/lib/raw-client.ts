// One raw exchange on a fresh TCP connection: write bytes exactly as given,
// then read until the peer closes, the expected number of responses is in,
// the line has been quiet for a while after a response, or the time-out.
import net from 'node:net'

export interface Exchange {
  /** status codes of the responses read, in order */
  statuses: number[]
  /** the peer closed (FIN or reset) before the time-out */
  closed: boolean
  /** nothing (no status line, no close) within the time-out */
  silent: boolean
  /** the first bytes read (latin1) */
  head: string
  ms: number
}

/** Status codes of the complete-enough responses in `text` (a response without Content-Length ends the count). */
function statuses (text: string): number[] {
  const out: number[] = []
  let at = 0
  for (;;) {
    const m = /^HTTP\/1\.[01] (\d{3})[^\r\n]*\r\n/.exec(text.slice(at))
    if (m === null) return out
    out.push(Number(m[1]))
    const end = text.indexOf('\r\n\r\n', at)
    if (end < 0) return out
    const cl = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(at, end))
    if (cl === null) return out
    at = end + 4 + Number(cl[1])
  }
}

export function exchange (port: number, bytes: Buffer, opts: { expect: number, timeoutMs: number, quietMs?: number }): Promise<Exchange> {
  return new Promise((resolve) => {
    const started = Date.now()
    const s = net.connect(port, '127.0.0.1')
    let text = ''
    let done = false
    let quiet: NodeJS.Timeout | null = null
    const finish = (closed: boolean): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      if (quiet !== null) clearTimeout(quiet)
      s.destroy()
      const st = statuses(text)
      resolve({ statuses: st, closed, silent: !closed && text === '', head: text.slice(0, 300), ms: Date.now() - started })
    }
    const timer = setTimeout(() => finish(false), opts.timeoutMs)
    s.on('connect', () => s.write(bytes))
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1')
      const n = statuses(text).length
      if (n >= opts.expect) { finish(false); return }
      if (n > 0) {
        if (quiet !== null) clearTimeout(quiet)
        quiet = setTimeout(() => finish(false), opts.quietMs ?? 400)
      }
    })
    s.on('error', () => finish(true))
    s.on('close', () => finish(true))
  })
}
