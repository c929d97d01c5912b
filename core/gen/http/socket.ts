// The API's unix socket, owned by file identity.
//
// Two lb processes can overlap on one config: the old one stopping (its
// runner still busy) while the new one starts. The new one takes the path
// once the old one stops answering on it; the old one, exiting later, must
// then not remove the new one's file, or every generate request of the new lb
// fails with 502 until a restart. So the file is removed only while it is the
// very file this process bound: same device, inode and creation time (ext4
// gives a new file the inode just freed, so device and inode alone matched the
// new lb's file). And no server is ever bound at the path itself: Node (libuv)
// unlinks a unix server's path by name when the server closes, whoever's file
// is there by then; each server binds a name of this process
// (.lb-PID.sock beside the path) and is renamed into place.
//
// Files also go away under a running process (a tmp cleaner, an operator, an
// older lb that removed it by path): every CHECK_MS the path is looked at, and
// a missing file is bound again. A file that another process put there is
// left alone (logged once): that process owns the path now.

import { createServer, type RequestListener, type Server } from 'node:http'
import { connect } from 'node:net'
import { type BigIntStats, lstatSync, unlinkSync } from 'node:fs'
import { lstat, mkdir, rename, unlink } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import type { Logger } from '../../log.js'
import { UNIX_PATH_MAX } from '../../net/listen.js'

const CHECK_MS = 1_000
/** How long start-up waits for another process to release the path before giving up. */
const CLAIM_WAIT_MS = 10_000

/** Nanoseconds, as lstat with bigint gives them; birthtime is 0 where the file system keeps none. */
interface Identity { dev: bigint, ino: bigint, ctimeNs: bigint, birthtimeNs: bigint }

const identityOf = (st: BigIntStats): Identity => ({ dev: st.dev, ino: st.ino, ctimeNs: st.ctimeNs, birthtimeNs: st.birthtimeNs })
const same = (a: Identity, b: Identity): boolean => a.ino === b.ino && a.dev === b.dev && a.ctimeNs === b.ctimeNs && a.birthtimeNs === b.birthtimeNs

const answers = (path: string): Promise<boolean> => new Promise((resolve) => {
  const s = connect(path)
  s.once('connect', () => { s.destroy(); resolve(true) })
  s.once('error', () => resolve(false))
})

const identity = async (path: string): Promise<Identity | null> => {
  try {
    return identityOf(await lstat(path, { bigint: true }))
  } catch {
    return null
  }
}

/**
 * Connections a unix socket queues before accept: a connect past it fails at once with EAGAIN (unlike
 * TCP, which retries), and every data-plane worker opens its upstream connections to this socket at the
 * same moment when streams start together: 511 (Node's default) let 215 of 1,000 concurrent streams fail
 * with 502 (bench/gen/relay.ts). The kernel caps it at net.core.somaxconn (4096 by default since Linux 5.4).
 */
const BACKLOG = 4096

const listen = (server: Server, path: string): Promise<void> => new Promise((resolve, reject) => {
  server.once('error', reject)
  server.listen({ path, backlog: BACKLOG }, () => { server.off('error', reject); resolve() })
})

export class OwnedSocket {
  readonly path: string
  private readonly handler: RequestListener
  private readonly log: Logger
  /** Every server made (older ones may still finish connections they accepted). */
  private readonly servers: Server[] = []
  private mine: Identity | null = null
  private timer: NodeJS.Timeout | null = null
  private checking = false
  private warnedTaken = false

  constructor (path: string, handler: RequestListener, log: Logger) {
    this.path = path
    this.handler = handler
    this.log = log
  }

  /** Takes the path (waiting up to CLAIM_WAIT_MS while another process still answers on it) and listens. */
  async start (): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true })
    const end = Date.now() + CLAIM_WAIT_MS
    let logged = false
    while (await answers(this.path)) {
      if (Date.now() > end) throw new Error(`generation socket ${this.path} is in use by another process`)
      if (!logged) this.log.warn('waiting for another process to release the generation socket', { socket: this.path })
      logged = true
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    await this.bind()
    this.timer = setInterval(() => { void this.check() }, CHECK_MS)
    this.timer.unref()
  }

  /**
   * Binds a new server at a name of this process and renames it over the path, replacing a stale file (nothing
   * answers on it); the folder too may have been removed. Where that name would be too long for a unix socket
   * and the path is not, the path itself is bound (Node then unlinks it by name at close: the header says so).
   */
  private async bind (): Promise<void> {
    const dir = dirname(this.path)
    await mkdir(dir, { recursive: true })
    const own = join(dir, `.lb-${process.pid}.sock`)
    const at = Buffer.byteLength(own) <= UNIX_PATH_MAX ? own : this.path
    await unlink(at).catch(() => undefined) // left by a process that had this pid, or the stale file at the path
    const server = createServer(this.handler)
    this.servers.push(server)
    await listen(server, at)
    if (at !== this.path) await rename(at, this.path)
    this.mine = await identity(this.path)
  }

  private async check (): Promise<void> {
    if (this.checking || this.timer === null) return
    this.checking = true
    try {
      const now = await identity(this.path)
      if (this.timer === null) return // stopped meanwhile: binding again would outlive the stop
      if (now === null) {
        this.log.error('the generation socket file was removed; listening on it again', { socket: this.path })
        this.servers.pop()?.close()
        await this.bind()
        this.warnedTaken = false
        // Stopped while binding: the new server must not keep the process alive.
        if (this.timer === null) this.stopAccepting()
      } else if (this.mine !== null && !same(now, this.mine) && !this.warnedTaken) {
        this.warnedTaken = true
        this.log.warn('another process listens on the generation socket path now; leaving it to that process', { socket: this.path })
      }
    } catch (e) {
      this.log.error('cannot listen on the generation socket again', { socket: this.path, err: (e as Error).message })
    } finally {
      this.checking = false
    }
  }

  /** Stops accepting (connections already accepted carry on until closeConnections). */
  stopAccepting (): void {
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
    for (const s of this.servers) s.close()
  }

  closeConnections (): void {
    for (const s of this.servers) s.closeAllConnections()
  }

  /**
   * Removes the file only if it is still the one this process bound. There is no "unlink if this
   * inode" call: another process would have to remove our file and bind its own between the lstat
   * and the unlink (microseconds, and only after ours stopped answering); its check() then binds again.
   */
  removeFile (): void {
    const mine = this.mine
    this.mine = null
    if (mine === null) return
    try {
      if (same(identityOf(lstatSync(this.path, { bigint: true })), mine)) unlinkSync(this.path)
    } catch {
      // already gone
    }
  }
}
