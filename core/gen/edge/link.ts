// A data-plane worker's line to the control plane for the remote model
// requests it relays (messages.ts): the servers' listing it was last sent,
// and its questions (admit, retry) waiting for their answers, each for at most
// ANSWER_WAIT_MS. One per worker (core/worker/main.ts makes it and hands it
// every data plane generation).

import { type EdgeAnswer, type EdgeEnd, type EdgeAdmit, type EdgeRetry, type EdgeToControl, NO_LISTING, type RemoteListing } from './messages.js'

/**
 * How long a question waits for the control plane, ms: past it the client gets a 503 (LB_ERR_GEN_RELAY_BUSY).
 * Above the longest admission: a cluster node waits for at most 4 lease rounds of [cluster] max_wait each.
 */
export const ANSWER_WAIT_MS = 10_000

export class EdgeLink {
  readonly #post: (m: EdgeToControl) => void
  readonly #waitMs: number
  /** every model some server lists (up or not), by canonical name */
  #known = new Set<string>()
  #seq = 0
  readonly #waiting = new Map<number, { resolve: (a: EdgeAnswer | null) => void, timer: NodeJS.Timeout }>()

  constructor (post: (m: EdgeToControl) => void, waitMs = ANSWER_WAIT_MS) {
    this.#post = post
    this.#waitMs = waitMs
    this.listing(NO_LISTING)
  }

  /** The control plane's listing (on every change of it). */
  listing (l: RemoteListing): void {
    const known = new Set<string>()
    for (const s of l.servers) for (const m of s.models) known.add(m)
    this.#known = known
  }

  /** Some remote server lists `model` (as far as the last listing says). */
  knows (model: string): boolean { return this.#known.has(model) }

  /** A new request's id (this worker's). */
  nextId (): number { return ++this.#seq }

  /** Asks; resolves with the answer, or null when none came within the wait (the request is then given up). */
  ask (m: EdgeAdmit | EdgeRetry): Promise<EdgeAnswer | null> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(m.id)
        resolve(null)
      }, this.#waitMs)
      this.#waiting.set(m.id, { resolve, timer })
      this.#post(m)
    })
  }

  tell (m: EdgeEnd): void { this.#post(m) }

  /** The control plane's answer to request `id`. One that comes after its wait named a server for nothing: given back. */
  answer (id: number, a: EdgeAnswer): void {
    const w = this.#waiting.get(id)
    if (w !== undefined) {
      this.#waiting.delete(id)
      clearTimeout(w.timer)
      w.resolve(a)
      return
    }
    if ('server' in a) this.giveBack(id)
  }

  /** Request `id` never ran here: its admission (reservation, server slot) is given back, nothing counted. */
  giveBack (id: number): void {
    this.tell({ kind: 'end', id, outcome: 'busy', refund: true, pieces: 0, first: 0n, end: process.hrtime.bigint(), result: null })
  }
}
