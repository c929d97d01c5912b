// The API's unix socket, owned by inode.
//
// Two lb processes can overlap on one config: the old one stopping (its
// runner still busy) while the new one starts. The new one takes the path
// once the old one stops answering on it; the old one, exiting later, must
// then not remove the new one's file, or every generate request of the new lb
// fails with 502 until a restart. So the file is removed only while it is the
// very file this process bound (same device and inode).
//
// Files also go away under a running process (a tmp cleaner, an operator, an
// older lb that removed it by path): every CHECK_MS the path is looked at, and
// a missing file is bound again. A file that another process put there is
// left alone (logged once): that process owns the path now.

import { createServer, type RequestListener, type Server } from 'node:http'
import { connect } from 'node:net'
import { lstatSync, unlinkSync } from 'node:fs'
import { lstat, mkdir, unlink } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Logger } from '../log.js'

const CHECK_MS = 1_000
/** How long start-up waits for another process to release the path before giving up. */
const CLAIM_WAIT_MS = 10_000

interface Identity { dev: number, ino: number }

const answers = (path: string): Promise<boolean> => new Promise((resolve) => {
  const s = connect(path)
  s.once('connect', () => { s.destroy(); resolve(true) })
  s.once('error', () => resolve(false))
})

const identity = async (path: string): Promise<Identity | null> => {
  try {
    const st = await lstat(path)
    return { dev: st.dev, ino: st.ino }
  } catch {
    return null
  }
}

const listen = (server: Server, path: string): Promise<void> => new Promise((resolve, reject) => {
  server.once('error', reject)
  server.listen(path, () => { server.off('error', reject); resolve() })
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

  /** Removes a stale file (nothing answers on it) and binds a new server (its folder too may have been removed). */
  private async bind (): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true })
    await unlink(this.path).catch(() => undefined)
    const server = createServer(this.handler)
    this.servers.push(server)
    await listen(server, this.path)
    this.mine = await identity(this.path)
  }

  private async check (): Promise<void> {
    if (this.checking || this.timer === null) return
    this.checking = true
    try {
      const now = await identity(this.path)
      if (now === null) {
        this.log.error('the generation socket file was removed; listening on it again', { socket: this.path })
        this.servers.pop()?.close()
        await this.bind()
        this.warnedTaken = false
        // Stopped while binding: the new server must not keep the process alive.
        if (this.timer === null) this.stopAccepting()
      } else if (this.mine !== null && (now.ino !== this.mine.ino || now.dev !== this.mine.dev) && !this.warnedTaken) {
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
      const st = lstatSync(this.path)
      if (st.ino === mine.ino && st.dev === mine.dev) unlinkSync(this.path)
    } catch {
      // already gone
    }
  }
}
