// A data-plane worker's line to the control plane for the remote model
// requests it relays (messages.ts): the servers' listing it was last sent,
// and its questions (admit, retry) waiting for their answers, each for at most
// ANSWER_WAIT_MS. One per worker (core/worker/main.ts makes it and hands it
// every data plane generation).
// A request the worker admits itself on the shared budget records (edge.ts)
// needs no question: the worker picks its server here from the listing and the
// shared in-flight counts, by the control plane's rule (remote/choice.ts), and
// tells it (EdgeAdmitted).

import type { BudgetRecords } from '../../shm/budget-records.js'
import { addInFlight, inFlightAt } from '../../shm/model-inflight.js'
import { chooseServer } from '../remote/choice.js'
import type { EdgeAnswer, EdgeEnd, EdgeAdmit, EdgeAdmitted, EdgeRetry, EdgeServer, EdgeToControl, ListedServer, RemoteListing } from './messages.js'

/** A server that lists a model: the model is its models[at]. */
interface Offer { readonly server: ListedServer, readonly at: number }

/** A server picked here, its count at `slot` taken, for a request admitted here in `minute` and `day` (its Ticket's). */
export interface Picked { readonly server: EdgeServer, readonly served: string, readonly slot: number, readonly minute: number, readonly day: number }

/**
 * How long a question waits for the control plane, ms: past it the client gets a 503 (LB_ERR_GEN_RELAY_BUSY).
 * Above the longest admission: a cluster node waits for lease rounds for at most 1 s (Budget.admit).
 */
export const ANSWER_WAIT_MS = 10_000

export class EdgeLink {
  readonly #post: (m: EdgeToControl) => void
  readonly #waitMs: number
  /** the shared memory's words (null: every request is asked about) */
  readonly #i32: Int32Array | null
  /** the consumers' budgets in shared memory (null: every request is asked about) */
  readonly records: BudgetRecords | null
  /** canonical name -> the servers that list it (up or not) */
  #offers = new Map<string, Offer[]>()
  #local = new Set<string>()
  /** rotates the start of the search among equals (choice.ts) */
  #turn = 0
  #seq = 0
  readonly #waiting = new Map<number, { resolve: (a: EdgeAnswer | null) => void, timer: NodeJS.Timeout }>()

  constructor (post: (m: EdgeToControl) => void, i32: Int32Array | null, records: BudgetRecords | null, waitMs = ANSWER_WAIT_MS) {
    this.#post = post
    this.#i32 = i32
    this.records = records
    this.#waitMs = waitMs
  }

  /** The control plane's listing (on every change of it). */
  listing (l: RemoteListing): void {
    const offers = new Map<string, Offer[]>()
    for (const server of l.servers) {
      server.models.forEach((m, at) => {
        const o = offers.get(m)
        if (o === undefined) offers.set(m, [{ server, at }])
        else o.push({ server, at })
      })
    }
    this.#offers = offers
    this.#local = new Set(l.local)
  }

  /** Some remote server lists `model` (as far as the last listing says). */
  knows (model: string): boolean { return this.#offers.has(model) }

  /**
   * Whether pick() may pick here: the control plane would not send the request the old way (every model of the
   * chain a remote one, none local), and counts every server listing the first model in shared memory.
   */
  canPick (chain: readonly string[]): boolean {
    if (this.#i32 === null) return false
    for (const m of chain) if (!this.#offers.has(m) || this.#local.has(m)) return false
    // a slot of -1 is counted in the control plane's memory: only it can compare
    return !this.#offers.get(chain[0]!)!.some((o) => o.server.up && o.server.slots[o.at]! < 0)
  }

  /**
   * The server for `chain`'s first model (canPick), picked here and counted in flight for a request admitted here
   * in `minute` and `day` (the caller tells the control plane: EdgeAdmitted), or null: none is up. Up, listing
   * it, loaded there first, then the fewest in flight across every thread.
   */
  pick (chain: readonly string[], minute: number, day: number): Picked | null {
    const i32 = this.#i32!
    const offers = this.#offers.get(chain[0]!)!
    const i = chooseServer(offers.length, this.#turn++ % offers.length, (i) => offers[i]!.server.up,
      (i) => offers[i]!.server.loaded[offers[i]!.at]!, (i) => inFlightAt(i32, offers[i]!.server.slots[offers[i]!.at]!))
    if (i < 0) return null
    const { server, at } = offers[i]!
    const slot = server.slots[at]!
    addInFlight(i32, slot, 1)
    return { server: server.call, served: server.served[at]!, slot, minute, day }
  }

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

  tell (m: EdgeEnd | EdgeAdmitted): void { this.#post(m) }

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
