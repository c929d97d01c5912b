// One raw HTTP/2 session for the fuzz surface: on a fresh TCP (h2c) or TLS
// (ALPN h2) connection, write the preface and the case's bytes exactly, then a
// PING whose ACK says lb has read all of them (frames are handled in order),
// and read what lb sends back until it closes, or the PING is answered, the
// awaited streams are settled and the line has been quiet a moment, or the
// time-out. What came back is sorted per stream: status, body, reset code.
import net from 'node:net'
import tls from 'node:tls'
import { F, PREFACE, T, type Frame, parseFrames, ping, settingsAck } from './h2-frames.js'
import { HpackDecoder } from './hpack.js'

export interface StreamOutcome {
  /** :status of the response head (0: none; -1: a head that did not decode) */
  status: number
  body: string
  ended: boolean
  /** RST_STREAM code from lb, or null */
  reset: number | null
}

export interface Session {
  goaway: { code: number, lastStream: number } | null
  streams: Map<number, StreamOutcome>
  /** lb closed the connection (FIN or reset) */
  closed: boolean
  /** the closing PING was answered: lb read every frame of the case without ending the session */
  pingAcked: boolean
  /** the socket's error code (ECONNRESET, or EADDRNOTAVAIL when the machine ran out of ports), null when none */
  error: string | null
  /** frames lb sent, by type name, for the report */
  trace: string[]
  ms: number
}

const MARK = Buffer.from('fz-done!')
const TYPES = ['DATA', 'HEADERS', 'PRIORITY', 'RST_STREAM', 'SETTINGS', 'PUSH_PROMISE', 'PING', 'GOAWAY', 'WINDOW_UPDATE', 'CONTINUATION']

export interface SessionOptions {
  port: number
  tls: boolean
  bytes: Buffer
  /** half-close after writing */
  end: boolean
  /** streams whose END_STREAM or RST_STREAM the session waits for */
  await: readonly number[]
  timeoutMs: number
  quietMs?: number
  /** how long to wait for the close after a GOAWAY, ms */
  closeWaitMs?: number
}

/**
 * One session; a connect that fails for want of a local port (EADDRNOTAVAIL: the machine's ephemeral ports
 * held in TIME_WAIT by an earlier surface) is tried again a few times rather than reported as lb's doing.
 */
export async function h2Session (o: SessionOptions): Promise<Session> {
  for (let i = 0; ; i++) {
    const r = await once(o)
    if (r.error !== 'EADDRNOTAVAIL' || i >= 5) return r
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
}

function once (o: SessionOptions): Promise<Session> {
  return new Promise((resolve) => {
    const started = Date.now()
    const r: Session = { goaway: null, streams: new Map(), closed: false, pingAcked: false, error: null, trace: [], ms: 0 }
    const hpack = new HpackDecoder()
    const s: net.Socket = o.tls
      ? tls.connect({ host: '127.0.0.1', port: o.port, servername: 'localhost', ALPNProtocols: ['h2'], rejectUnauthorized: false })
      : net.connect(o.port, '127.0.0.1')
    let buf: Buffer = Buffer.alloc(0)
    let block: { stream: number, parts: Buffer[], end: boolean } | null = null
    let done = false
    let quiet: NodeJS.Timeout | null = null
    const finish = (closed: boolean): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      if (quiet !== null) clearTimeout(quiet)
      r.closed = closed
      r.ms = Date.now() - started
      s.destroy()
      resolve(r)
    }
    const timer = setTimeout(() => finish(false), o.timeoutMs)
    const stream = (id: number): StreamOutcome => {
      let x = r.streams.get(id)
      if (x === undefined) r.streams.set(id, x = { status: 0, body: '', ended: false, reset: null })
      return x
    }
    const settled = (): boolean => o.await.every((id) => { const x = r.streams.get(id); return x !== undefined && (x.ended || x.reset !== null) })
    const onFrame = (f: Frame): void => {
      r.trace.push(`${TYPES[f.type] ?? f.type}${f.stream === 0 ? '' : `(${f.stream})`}`)
      if (f.type === T.SETTINGS && (f.flags & F.ACK) === 0) { if (s.writable) s.write(settingsAck()) } else if (f.type === T.PING && (f.flags & F.ACK) !== 0 && f.payload.equals(MARK)) r.pingAcked = true
      else if (f.type === T.GOAWAY && f.payload.length >= 8) {
        r.goaway = { lastStream: f.payload.readUInt32BE(0) & 0x7fffffff, code: f.payload.readUInt32BE(4) }
        // after a GOAWAY only the close is still to come: wait for it a while, not the whole time-out
        if (quiet !== null) clearTimeout(quiet)
        quiet = setTimeout(() => finish(false), o.closeWaitMs ?? 1000)
        r.trace[r.trace.length - 1] += ` ${r.goaway.code}`
      } else if (f.type === T.RST_STREAM && f.payload.length === 4) {
        stream(f.stream).reset = f.payload.readUInt32BE(0)
        r.trace[r.trace.length - 1] += ` ${f.payload.readUInt32BE(0)}`
      } else if (f.type === T.DATA) {
        const x = stream(f.stream)
        const pad = (f.flags & F.PADDED) !== 0 ? f.payload[0]! + 1 : 0
        x.body += f.payload.subarray(pad === 0 ? 0 : 1, f.payload.length - (pad === 0 ? 0 : pad - 1)).toString('latin1')
        if (f.flags & F.END_STREAM) x.ended = true
      } else if (f.type === T.HEADERS || (f.type === T.CONTINUATION && block !== null)) {
        if (f.type === T.HEADERS) {
          let p = f.payload
          if (f.flags & F.PADDED) p = p.subarray(1, p.length - p[0]!)
          if (f.flags & F.PRIORITY) p = p.subarray(5)
          block = { stream: f.stream, parts: [p], end: (f.flags & F.END_STREAM) !== 0 }
        } else block!.parts.push(f.payload)
        if (f.flags & F.END_HEADERS) {
          const b = block!
          block = null
          const x = stream(b.stream)
          const fields = hpack.decode(Buffer.concat(b.parts))
          const st = fields?.find(([k]) => k === ':status')?.[1]
          if (x.status === 0) x.status = fields === null ? -1 : Number(st ?? 0)
          if (b.end) x.ended = true
        }
      }
    }
    s.on(o.tls ? 'secureConnect' : 'connect', () => {
      s.write(Buffer.concat([PREFACE, o.bytes, ping(MARK)]))
      if (o.end) s.end()
    })
    s.on('data', (d: Buffer) => {
      const { frames, rest } = parseFrames(buf.length === 0 ? d : Buffer.concat([buf, d]))
      buf = rest
      for (const f of frames) onFrame(f)
      if (r.pingAcked && settled() && r.goaway === null) {
        if (quiet !== null) clearTimeout(quiet)
        quiet = setTimeout(() => finish(false), o.quietMs ?? 150)
      }
    })
    s.on('error', (err: NodeJS.ErrnoException) => { r.error ??= err.code ?? err.message; finish(true) })
    s.on('close', () => finish(true))
  })
}
