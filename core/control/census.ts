// Counts client connections from the kernel. uWS gives no connection
// open/close events for HTTP, so the control plane reads the established TCP
// sockets on the entry points' addresses from /proc/net/tcp{,6} every
// CENSUS_MS: the count is stub_status "Active connections", sockets not seen
// before are "accepts", and reaching global.max_connections makes every worker
// stop accepting (the kernel then refuses new connections) until it drops.
// Connections that open and close between two censuses are not counted in accepts.
// With very many sockets on the host the period grows (see start()).
import { readFile } from 'node:fs/promises'
import { isIPv4 } from 'node:net'
import type { EntryPointConf } from '../config/static.js'
import { type Shm, G_ACCEPTS, H_CONN_ACTIVE, H_CONN_CAP_HIT, stripeBase } from '../shm/layout.js'
import { parseIp } from '../net/ip.js'

export const CENSUS_MS = 250
const CENSUS_MAX_MS = 2_000
const ESTABLISHED = '01'

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
  const mapped = ip.subarray(0, 10).every((b) => b === 0) && ip[10] === 0xff && ip[11] === 0xff
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
   * /proc files to read: both walk the kernel's whole table of established
   * sockets (most of a census's cost), so tcp6 is read only when an entry
   * point can have IPv6 sockets (an IPv4 address, "0.0.0.0" included, listens on AF_INET).
   */
  readonly #files: string[]
  readonly #setAccepting: (on: boolean) => void
  #seen = new Set<string>()
  #timer: NodeJS.Timeout | null = null

  constructor (shm: Shm, entrypoints: readonly EntryPointConf[], maxConnections: number, setAccepting: (on: boolean) => void) {
    this.#shm = shm
    const keys = entrypoints.flatMap(keysFor)
    this.#keys = new Set(keys.filter((k) => !k.startsWith('*:')))
    this.#ports = new Set(keys.filter((k) => k.startsWith('*:')).map((k) => k.slice(2)))
    this.#max = maxConnections
    const v6 = entrypoints.some((ep) => !isIPv4(ep.host))
    this.#files = v6 ? ['/proc/net/tcp', '/proc/net/tcp6'] : ['/proc/net/tcp']
    this.#setAccepting = setAccepting
  }

  start (): void {
    const tick = (): void => {
      this.sample().catch(() => 0).then((ms) => {
        // reading /proc/net/tcp walks every TCP socket of the host: with very many
        // sockets, sample less often (at most every 2 s) to keep the census near 5% of a core
        this.#timer = setTimeout(tick, Math.min(CENSUS_MAX_MS, Math.max(CENSUS_MS, ms * 20)))
        this.#timer.unref()
      })
    }
    tick()
  }

  stop (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
  }

  /** Counts once; resolves with the milliseconds it took (the kernel's walk of its socket table is most of it). */
  async sample (): Promise<number> {
    const now = new Set<string>()
    const t0 = performance.now()
    for (const f of this.#files) {
      let text: string
      try {
        text = await readFile(f, 'latin1')
      } catch {
        continue
      }
      let pos = text.indexOf('\n') + 1
      while (pos > 0 && pos < text.length) {
        const end = text.indexOf('\n', pos)
        const line = text.slice(pos, end < 0 ? text.length : end)
        pos = end < 0 ? -1 : end + 1
        // "  sl: local rem st ... inode ...": look at the local address first, split only our own sockets
        const at = line.indexOf(': ') + 2
        const local = line.slice(at, line.indexOf(' ', at))
        if (!this.#keys.has(local) && !this.#ports.has(local.slice(local.indexOf(':') + 1))) continue
        const f = line.trim().split(/\s+/)
        if (f[3] === ESTABLISHED) now.add(f[9]! + '/' + f[2]!) // inode + peer
      }
    }
    let fresh = 0
    for (const k of now) if (!this.#seen.has(k)) fresh++
    this.#seen = now
    const i32 = this.#shm.i32
    Atomics.store(i32, H_CONN_ACTIVE, now.size)
    this.#shm.f64[stripeBase(this.#shm.workers) + G_ACCEPTS]! += fresh
    const full = now.size >= this.#max
    Atomics.store(i32, H_CONN_CAP_HIT, full ? 1 : 0)
    this.#setAccepting(!full)
    return performance.now() - t0
  }
}
