// Requests in flight per (remote model server, model) pair, in shared memory
// (layout.ts MODEL_SLOTS), so that a data-plane worker can pick the model
// server with the fewest in flight and count its own request there without
// asking the control plane (core/gen/edge/), and every thread's count is exact.
// The control plane hands out the slots (ModelSlots) and tells the workers in
// the servers' listing; a slot, once given to a pair, stays that pair's for
// the life of the process ([generation] is static: its servers never change),
// so a listing a worker holds is never wrong about a slot, only late.
// Past MODEL_SLOTS pairs a pair has no slot (-1): the control plane counts it
// in its own memory and the workers ask it for those.
// A count goes back down when the control plane hears the request's end, or
// that its worker died (RemoteBroker.dropWorker); a worker that dies in the
// same turn of its loop in which it counted a request, before telling the
// control plane (EdgeAdmitted), leaves that one count behind.

import { MODEL_BASE, MODEL_SLOTS } from './layout.js'

/** Requests in flight at `slot` now. */
export function inFlightAt (i32: Int32Array, slot: number): number {
  return Atomics.load(i32, MODEL_BASE + slot)
}

/** Adds `n` (+1 at a request's start, -1 at its end) to the count at `slot`. */
export function addInFlight (i32: Int32Array, slot: number, n: number): void {
  Atomics.add(i32, MODEL_BASE + slot, n)
}

/** The control plane's slot table. */
export class ModelSlots {
  readonly i32: Int32Array
  readonly #slots = new Map<string, number>()

  constructor (i32: Int32Array) {
    this.i32 = i32
  }

  /** The slot of `model` on server `server`, given out on first ask; -1 when every slot is taken. */
  slotOf (server: string, model: string): number {
    const key = `${server}\0${model}`
    let s = this.#slots.get(key)
    if (s === undefined) {
      if (this.#slots.size >= MODEL_SLOTS) return -1
      s = this.#slots.size
      this.#slots.set(key, s)
    }
    return s
  }
}
