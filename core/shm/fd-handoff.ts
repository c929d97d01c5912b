// Hands accepted connections (their descriptors) from worker 0 to the other
// workers' uWS apps (adoptSocket), for the https entry points worker 0 accepts
// in node:net (core/worker/tls/tls-terminator.ts says which clients go this way).
//
// A descriptor is a number valid in every thread of the process, so the hand-off
// is a message: worker 0 writes the descriptor into a free cell of the shared
// memory (layout.ts HANDOFF_CELLS) and posts the cell's number on the receiving
// worker's BroadcastChannel. Whoever swaps the cell back to 0 owns the
// descriptor: the receiver, which adopts it, or worker 0, which takes back one
// left unclaimed for CLAIM_MS (the worker was restarting, its channel closed, or
// its loop is stuck) and gives it to the next worker; after every worker, it
// closes it. So a connection is served by exactly one worker or closed, never
// leaked and never closed under a worker that adopted it.
//
// A cell holds (fd << 4 | entry point) + 1: a late message can only claim the
// connection it names, for the entry point it names.
import { closeSync } from 'node:fs'
import { BroadcastChannel } from 'node:worker_threads'
import { HANDOFF_BASE, HANDOFF_CELLS, MAX_ENTRYPOINTS } from './layout.js'

/** How long a handed descriptor waits to be claimed before worker 0 takes it back, in ms. */
export const CLAIM_MS = 1000

const channel = (worker: number): string => `lb-handoff-${worker}`
const cellValue = (ep: number, fd: number): number => (fd * MAX_ENTRYPOINTS + ep) + 1

interface Pending { readonly ep: number, readonly fd: number, readonly at: number, readonly tried: number }

export class FdSender {
  readonly #i32: Int32Array
  readonly #self: number
  readonly #workers: number
  /** adopts a connection in this thread; false: not here (the descriptor is still the caller's) */
  readonly #local: (ep: number, fd: number) => boolean
  readonly #channels: BroadcastChannel[] = []
  /** handed and not yet known to be claimed, by cell */
  readonly #pending = new Map<number, Pending>()
  #next = 0
  #cursor = 0
  #sweep: NodeJS.Timeout | null = null

  constructor (i32: Int32Array, self: number, workers: number, local: (ep: number, fd: number) => boolean) {
    this.#i32 = i32
    this.#self = self
    this.#workers = workers
    this.#local = local
    for (let w = 0; w < workers; w++) this.#channels.push(new BroadcastChannel(channel(w)))
    for (const c of this.#channels) c.unref()
  }

  /** Gives `fd`, a connection of entry point number `ep`, to the workers in turn; it is theirs from now on. */
  give (ep: number, fd: number, tried = 0): void {
    for (; tried < this.#workers; tried++) {
      const w = this.#next
      this.#next = (w + 1) % this.#workers
      if (w === this.#self) {
        if (this.#local(ep, fd)) return
        continue
      }
      const cell = this.#freeCell()
      if (cell < 0) break // every cell waits on a worker: none is taking connections
      Atomics.store(this.#i32, HANDOFF_BASE + cell, cellValue(ep, fd))
      this.#pending.set(cell, { ep, fd, at: performance.now(), tried })
      this.#channels[w]!.postMessage([ep, cell, fd])
      this.#sweep ??= setInterval(() => this.#takeBack(), CLAIM_MS / 2).unref()
      return
    }
    closeSync(fd)
  }

  close (): void {
    for (const c of this.#channels) c.close()
    if (this.#sweep !== null) clearInterval(this.#sweep)
  }

  #freeCell (): number {
    for (let i = 0; i < HANDOFF_CELLS; i++) {
      const cell = (this.#cursor + i) % HANDOFF_CELLS
      if (Atomics.load(this.#i32, HANDOFF_BASE + cell) !== 0) continue
      this.#pending.delete(cell) // claimed: only this thread writes a cell non-zero
      this.#cursor = cell + 1
      return cell
    }
    return -1
  }

  /** Takes back what waited CLAIM_MS unclaimed and gives it to the next worker. */
  #takeBack (): void {
    const now = performance.now()
    for (const [cell, p] of this.#pending) {
      const v = cellValue(p.ep, p.fd)
      if (Atomics.load(this.#i32, HANDOFF_BASE + cell) !== v) this.#pending.delete(cell)
      else if (now - p.at >= CLAIM_MS && Atomics.compareExchange(this.#i32, HANDOFF_BASE + cell, v, 0) === v) {
        this.#pending.delete(cell)
        this.give(p.ep, p.fd, p.tried + 1)
      }
    }
    if (this.#pending.size === 0 && this.#sweep !== null) {
      clearInterval(this.#sweep)
      this.#sweep = null
    }
  }
}

/**
 * Takes the connections worker 0 hands to worker `self`, for the life of the thread (unref'd: it keeps none
 * alive): `adopt` gets each one this thread claimed, and owns it from then on.
 */
export function receiveFds (i32: Int32Array, self: number, adopt: (ep: number, fd: number) => void): void {
  const c = new BroadcastChannel(channel(self))
  c.unref()
  c.onmessage = (e) => {
    const [ep, cell, fd] = (e as { data: [number, number, number] }).data
    const v = cellValue(ep, fd)
    if (Atomics.compareExchange(i32, HANDOFF_BASE + cell, v, 0) === v) adopt(ep, fd)
  }
}
