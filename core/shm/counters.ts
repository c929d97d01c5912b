// Striped counters: each thread adds to its own stripe with plain stores (it is
// the only writer there), readers sum all stripes. Reads may be a few
// increments stale; they never tear on the 64-bit platforms Node runs on.
import {
  type Shm, C_INFLIGHT, EC_OPEN, EC_WORDS, EP_COUNTERS, EP_OPEN, G_CONN_OPEN, G_EP, G_READING, G_WRITING, H_CONN_ACTIVE, H_EP_CONNS, GLOBAL_COUNTERS,
  MAX_ENTRYPOINTS, MAX_SERVERS, SRV_COUNTERS, STRIPE_WORDS, serverCounterBase, stripeBase,
} from './layout.js'

/** i32 index of entry point `ep`'s connection words (EC_*) */
export const epConnBase = (ep: number): number => H_EP_CONNS + ep * EC_WORDS
/** f64 index of entry point `ep`'s counters (EP_*) in `stripe` */
export const epCounterBase = (stripe: number, ep: number): number => stripeBase(stripe) + G_EP + ep * EP_COUNTERS

/** Sums global counter `id` over every stripe (workers and control plane). */
export function sumGlobal (shm: Shm, id: number): number {
  let s = 0
  for (let w = 0; w <= shm.workers; w++) s += shm.f64[w * STRIPE_WORDS + id]!
  return s
}

/** Sums per-server counter `id` of server `slot` over every stripe. */
export function sumServer (shm: Shm, slot: number, id: number): number {
  let s = 0
  for (let w = 0; w <= shm.workers; w++) s += shm.f64[serverCounterBase(w, slot) + id]!
  return s
}

/** Sums counter `id` (EP_*) of entry point `ep` over every stripe. */
export function sumEntryPoint (shm: Shm, ep: number, id: number): number {
  let s = 0
  for (let w = 0; w <= shm.workers; w++) s += shm.f64[epCounterBase(w, ep) + id]!
  return s
}

/** Zeroes a server slot's counters in every stripe (the slot is being reused for a new server). */
export function clearServerCounters (shm: Shm, slot: number): void {
  for (let w = 0; w <= shm.workers; w++) shm.f64.fill(0, serverCounterBase(w, slot), serverCounterBase(w, slot) + SRV_COUNTERS)
}

/**
 * Zeroes the gauges of stripe `stripe` after its worker died: what it had in
 * flight died with it, and would otherwise be counted (the status page's Writing,
 * leastconn, drain, open connections) forever. Runs before the replacement starts on that stripe.
 */
export function clearGauges (shm: Shm, stripe: number): void {
  const f64 = shm.f64
  f64[stripeBase(stripe) + G_WRITING] = 0
  f64[stripeBase(stripe) + G_READING] = 0
  // its connections closed with it
  Atomics.sub(shm.i32, H_CONN_ACTIVE, f64[stripeBase(stripe) + G_CONN_OPEN]!)
  f64[stripeBase(stripe) + G_CONN_OPEN] = 0
  for (let ep = 0; ep < MAX_ENTRYPOINTS; ep++) {
    const own = epCounterBase(stripe, ep) + EP_OPEN
    Atomics.sub(shm.i32, epConnBase(ep) + EC_OPEN, f64[own]!)
    f64[own] = 0
  }
  for (let slot = 0; slot < MAX_SERVERS; slot++) f64[serverCounterBase(stripe, slot) + C_INFLIGHT] = 0
}

/** A thread's own view: its stripe's base offsets, so hot paths do one add. */
export class Stripe {
  readonly f64: Float64Array
  readonly base: number

  constructor (shm: Shm, stripe: number) {
    this.f64 = shm.f64
    this.base = stripeBase(stripe)
  }

  add (id: number, n = 1): void {
    this.f64[this.base + id]! += n
  }

  addServer (slot: number, id: number, n = 1): void {
    this.f64[this.base + GLOBAL_COUNTERS + slot * SRV_COUNTERS + id]! += n
  }
}
