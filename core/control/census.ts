// Counts client connections from the kernel. uWS gives no connection
// open/close events for HTTP, so the control plane reads the established TCP
// sockets on the entry points' addresses from /proc/net/tcp{,6}: the count is
// stub_status "Active connections", sockets not seen before are "accepts",
// and reaching global.max_connections makes every worker stop accepting (the
// kernel then refuses new connections) until it drops.
// Connections that open and close between two censuses are not counted in accepts.
//
// Cost: reading /proc/net/tcp walks and prints every TCP socket of the host,
// TIME_WAIT ones included (a proxy next door that churns upstream connections
// leaves 100k of them: ~75 ms a read). So the full census runs every CENSUS_MS,
// less often when it is slow (about 1% of a core), and between two censuses a
// cheap gate (/proc/net/sockstat, a sum of per-CPU counters) runs every GATE_MS:
// the host's TCP sockets in use bound ours from above, so below the cap it
// proves the cap is not reached, and at or above it the census runs at once.
import { closeSync, openSync, readSync } from 'node:fs'
import { isIPv4 } from 'node:net'
import type { EntryPointConf } from '../config/static.js'
import { type Shm, G_ACCEPTS, H_CONN_ACTIVE, H_CONN_CAP_HIT, stripeBase } from '../shm/layout.js'
import { isMappedV4, parseIp } from '../net/ip.js'
import { guarded } from './faults.js'

export const CENSUS_MS = 1_000
const CENSUS_MAX_MS = 10_000
const GATE_MS = 250
/** Census period per millisecond one census took: about 1% of a core, 5% while the gate says the cap may be near. */
const PERIOD_PER_COST = 100
const CAP_PERIOD_PER_COST = 20

/** Reads a /proc file whole, synchronously, into a buffer kept between calls (it grows to the largest file read: about 150 bytes a socket); returns its length in bytes. */
let procBuf = Buffer.allocUnsafe(1 << 16)
function readProc (path: string): number {
  // synchronous on purpose: the kernel hands /proc/net/tcp out one page per read, and a
  // thread-pool round trip per page costs four times the reads themselves
  const fd = openSync(path, 'r')
  try {
    let len = 0
    for (;;) {
      if (procBuf.length - len < 4096) {
        const bigger = Buffer.allocUnsafe(procBuf.length * 2)
        procBuf.copy(bigger, 0, 0, len)
        procBuf = bigger
      }
      const n = readSync(fd, procBuf, len, procBuf.length - len, null)
      if (n === 0) return len
      len += n
    }
  } finally {
    closeSync(fd)
  }
}

/** TCP sockets in use in this network namespace (any state but TIME_WAIT), from /proc/net/sockstat{,6}; Infinity if unknown. */
function tcpInUse (files: readonly string[]): number {
  let n = 0
  for (const f of files) {
    let m: RegExpExecArray | null = null
    try {
      m = /^TCP6?: inuse (\d+)/m.exec(procBuf.toString('latin1', 0, readProc(f)))
    } catch {}
    if (m === null) return Infinity
    n += Number(m[1])
  }
  return n
}

/** Kernel text of a 16-byte address: each 32-bit word in host (little-endian) byte order, as /proc/net/tcp6 prints it. */
function procHex (bytes: Uint8Array): string {
  let s = ''
  for (let i = 0; i < bytes.length; i += 4) s += Buffer.from(bytes.subarray(i, i + 4)).readUInt32LE(0).toString(16).toUpperCase().padStart(8, '0')
  return s
}

/** The /proc local-address keys an entry point's sockets show up under; "*:PORT" for a wildcard address. */
function keysFor (ep: EntryPointConf): string[] {
  // "localhost" may be bound as 127.0.0.1 or ::1, whichever the resolver gives first
  if (ep.host === 'localhost') return [...keysFor({ ...ep, host: '127.0.0.1' }), ...keysFor({ ...ep, host: '::1' })]
  const port = ep.port.toString(16).toUpperCase().padStart(4, '0')
  const ip = parseIp(ep.host)
  if (ip === null) return [`*:${port}`]
  const mapped = isMappedV4(ip)
  const addr = mapped ? ip.subarray(12) : ip
  if (addr.every((b) => b === 0)) return [`*:${port}`]
  // an IPv4 address appears in tcp (8 hex digits) and, on dual-stack sockets, in tcp6 as ::ffff:a.b.c.d
  return mapped ? [`${procHex(addr)}:${port}`, `${procHex(ip)}:${port}`] : [`${procHex(ip)}:${port}`]
}

export class Census {
  readonly #shm: Shm
  readonly #keys: Set<string>
  readonly #ports: Set<string>
  readonly #max: number
  /**
   * /proc files to read: tcp6 is read only when an entry point can have IPv6
   * sockets (an IPv4 address, "0.0.0.0" included, listens on AF_INET).
   */
  readonly #files: string[]
  readonly #statFiles: string[]
  readonly #setAccepting: (on: boolean) => void
  #seen = new Set<string>()
  #timer: NodeJS.Timeout | null = null
  /** performance.now() (ms) of the last full census, and what it took (ms): the periods follow from it. */
  #last = -Infinity
  #cost = 0

  constructor (shm: Shm, entrypoints: readonly EntryPointConf[], maxConnections: number, setAccepting: (on: boolean) => void) {
    this.#shm = shm
    const keys = entrypoints.flatMap(keysFor)
    this.#keys = new Set(keys.filter((k) => !k.startsWith('*:')))
    this.#ports = new Set(keys.filter((k) => k.startsWith('*:')).map((k) => k.slice(2)))
    this.#max = maxConnections
    const v6 = entrypoints.some((ep) => !isIPv4(ep.host))
    this.#files = v6 ? ['/proc/net/tcp', '/proc/net/tcp6'] : ['/proc/net/tcp']
    this.#statFiles = v6 ? ['/proc/net/sockstat', '/proc/net/sockstat6'] : ['/proc/net/sockstat']
    this.#setAccepting = setAccepting
  }

  start (): void {
    // without /proc (not Linux, or hidden) nothing is counted: unreadable files read as empty (#sample) or unknown (tcpInUse)
    const tick = (): void => {
      guarded('connection census', () => this.#tick())
      this.#timer = setTimeout(tick, GATE_MS)
      this.#timer.unref()
    }
    tick()
  }

  stop (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
  }

  #tick (): void {
    const since = performance.now() - this.#last
    if (since < Math.min(CENSUS_MAX_MS, Math.max(CENSUS_MS, this.#cost * PERIOD_PER_COST))) {
      // between two full censuses: the gate says whether the cap needs one now
      if (tcpInUse(this.#statFiles) < this.#max) {
        if (Atomics.load(this.#shm.i32, H_CONN_CAP_HIT) === 1) this.#publishCap(false)
        return
      }
      if (since < Math.max(GATE_MS, this.#cost * CAP_PERIOD_PER_COST)) return
    }
    this.#cost = this.#sample()
    this.#last = performance.now()
  }

  #publishCap (full: boolean): void {
    Atomics.store(this.#shm.i32, H_CONN_CAP_HIT, full ? 1 : 0)
    this.#setAccepting(!full)
  }

  /** Counts once; returns the milliseconds it took (the kernel's walk of its socket table is most of it). */
  #sample (): number {
    const t0 = performance.now()
    const now = new Set<string>()
    for (const f of this.#files) {
      let len: number
      try {
        len = readProc(f)
      } catch {
        continue
      }
      const buf = procBuf
      // "  sl: local rem st ...": local and remote are fixed-width hex, so the state sits at a fixed
      // offset from the first ": ", and most lines (TIME_WAIT, other ports) are skipped without a string
      const addrLen = f.endsWith('6') ? 37 : 13
      let pos = buf.indexOf(10) + 1
      while (pos > 0 && pos < len) {
        let end = buf.indexOf(10, pos)
        if (end < 0 || end > len) end = len
        const at = buf.indexOf(58, pos) + 2 // ':' of "sl:"
        const st = at + 2 * addrLen + 2
        if (at > 1 && st + 1 < end && buf[st] === 48 && buf[st + 1] === 49) { // "01": ESTABLISHED
          const local = buf.toString('latin1', at, at + addrLen)
          if (this.#keys.has(local) || this.#ports.has(local.slice(addrLen - 4))) {
            const fields = buf.toString('latin1', pos, end).trim().split(/\s+/)
            now.add(fields[9]! + '/' + fields[2]!) // inode + peer
          }
        }
        pos = end + 1
      }
    }
    let fresh = 0
    for (const k of now) if (!this.#seen.has(k)) fresh++
    this.#seen = now
    Atomics.store(this.#shm.i32, H_CONN_ACTIVE, now.size)
    this.#shm.f64[stripeBase(this.#shm.workers) + G_ACCEPTS]! += fresh
    this.#publishCap(now.size >= this.#max)
    return performance.now() - t0
  }
}
