// Session revocations in the control plane. Workers add a logout's entry to
// the node's shared table themselves (core/shm/revocations.ts: every worker
// refuses the session at once) and hand it here (PluginEnv.shareRevocation):
// it goes to the revocation file in the state folder, so a restart keeps it,
// and with [cluster] to every other node (core/cluster/revocations.ts), whose
// entries come back here into the table and the file.
//
// The file: one line per entry, "<key: 16 hex> <at> <exp>" (unix s), and
// "epoch <s>" when a full table moved the epoch; appended as entries come,
// rewritten with the live entries only at start and when it has grown past
// twice them. A line that does not parse is skipped and counted in the log.
import { appendFileSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { writeFileAtomic } from '../atomic-file.js'
import { REVOKE_WAYS } from '../shm/layout.js'
import { formatError } from '../errors.js'
import type { Logger } from '../log.js'
import { type Revocation, ADDED, KEPT, Revocations, keyHex, parseKeyHex, unixNow } from '../shm/revocations.js'

/** The file's name in global.state_dir. */
export const REVOCATION_FILE = 'session-revocations'
/** the file is rewritten once this many lines were appended, or twice the live entries at the last rewrite */
const REWRITE_LINES = 4096

/** What shares revocations with the other nodes (core/cluster/revocations.ts). */
export interface RevocationShare {
  /** resolves once every live node has it, or after a bound; never rejects */
  publish (r: Revocation): Promise<void>
  publishEpoch (epoch: number): Promise<void>
}

export class RevocationHub {
  readonly table: Revocations
  readonly #path: string
  readonly #log: Logger
  /** set by the cluster when [cluster] is on */
  share: RevocationShare | null = null
  /** the epoch last written and shared */
  #epoch = 0
  #appended = 0
  #rewriteAt = REWRITE_LINES
  #writeFailed = false

  constructor (i32: Int32Array, stateDir: string, log: Logger) {
    this.table = new Revocations(i32)
    this.#path = join(stateDir, REVOCATION_FILE)
    this.#log = log
  }

  /** Reads the file into the table (at start, before any worker), then rewrites it with the live entries. */
  load (): void {
    let text = ''
    try {
      text = readFileSync(this.#path, 'utf8')
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.#log.error('session revocations file unreadable; starting without it', { file: this.#path, error: (err as Error).message })
    }
    const t = unixNow()
    let bad = 0
    for (const line of text.split('\n')) {
      if (line === '') continue
      const f = line.split(' ')
      const key = parseKeyHex(f[0] ?? '')
      const at = Number(f[1])
      if (f[0] === 'epoch' && f.length === 2 && Number.isInteger(at) && at > 0) this.table.setEpoch(at)
      else if (key !== null && f.length === 3 && Number.isInteger(at) && Number.isInteger(Number(f[2]))) this.table.add({ ka: key[0], kb: key[1], at, exp: Number(f[2]) }, t)
      else bad++
    }
    if (bad > 0) this.#log.warn('session revocations file: lines skipped', { file: this.#path, lines: bad })
    // a table made smaller since (limits.session_revocations) may not hold the file's entries
    if (this.table.resets() > 0) this.#log.error(formatError('LB_ERR_REVOCATIONS_FULL', { node: 'this node', time: new Date(this.table.epoch() * 1000).toISOString() }), { code: 'LB_ERR_REVOCATIONS_FULL', file: this.#path })
    this.#epoch = this.table.epoch()
    this.#rewrite()
  }

  /** A worker's revocation (already in the table): kept, then shared; resolves when every live node has it. */
  async local (r: Revocation): Promise<void> {
    this.#append(`${keyHex(r.ka, r.kb)} ${r.at} ${r.exp}`)
    const epoch = this.#epochMoved()
    await Promise.all([epoch, this.share?.publish(r)])
  }

  /** Another node's revocation: into the table and the file. */
  remote (r: Revocation): void {
    const result = this.table.add(r, unixNow())
    if (result === ADDED || result === KEPT) this.#append(`${keyHex(r.ka, r.kb)} ${r.at} ${r.exp}`)
    void this.#epochMoved()
  }

  /** Another node's epoch (its table was full): every session born until then is refused here too. */
  remoteEpoch (epoch: number, node: string): void {
    if (!this.table.setEpoch(epoch)) return
    this.#epoch = epoch
    this.#append(`epoch ${epoch}`)
    this.#log.error(formatError('LB_ERR_REVOCATIONS_FULL', { node, time: new Date(epoch * 1000).toISOString() }), { code: 'LB_ERR_REVOCATIONS_FULL', node })
  }

  /** When this node's table moved its epoch (it was full): kept, logged, shared. */
  #epochMoved (): Promise<void> {
    const epoch = this.table.epoch()
    if (epoch <= this.#epoch) return Promise.resolve()
    this.#epoch = epoch
    this.#append(`epoch ${epoch}`)
    this.#log.error(formatError('LB_ERR_REVOCATIONS_FULL', { node: 'this node', time: new Date(epoch * 1000).toISOString() }), { code: 'LB_ERR_REVOCATIONS_FULL', entries: this.table.sets * REVOKE_WAYS })
    return this.share?.publishEpoch(epoch) ?? Promise.resolve()
  }

  #append (line: string): void {
    try {
      appendFileSync(this.#path, line + '\n', { mode: 0o600 })
      this.#writeFailed = false
    } catch (err) {
      if (!this.#writeFailed) this.#log.error('cannot write the session revocations file: a restart forgets revocations since', { file: this.#path, error: (err as Error).message })
      this.#writeFailed = true
    }
    if (++this.#appended >= this.#rewriteAt) this.#rewrite()
  }

  #rewrite (): void {
    const live = this.table.entries(unixNow())
    const lines = live.map((r) => `${keyHex(r.ka, r.kb)} ${r.at} ${r.exp}\n`)
    if (this.#epoch > 0) lines.unshift(`epoch ${this.#epoch}\n`)
    try {
      writeFileAtomic(this.#path, lines.join(''))
    } catch (err) {
      this.#log.error('cannot write the session revocations file: a restart forgets revocations since', { file: this.#path, error: (err as Error).message })
    }
    this.#appended = 0
    this.#rewriteAt = Math.max(REWRITE_LINES, 2 * live.length)
  }
}
