// The lock of a set of a shared table (the rate tables' sets, the revocation
// table): a word taken with Atomics.compareExchange and released with
// Atomics.store. Critical sections are a few dozen integer operations with no
// allocation and no call out, so a holder is never descheduled for long; a
// lock held longer than STALE_LOCK_MS can only belong to a thread that died
// inside it (a terminated worker), and a waiter takes it over.
import { threadId } from 'node:worker_threads'

/** A waiter takes over a lock whose holder has not changed for this long (it died inside the critical section). */
export const STALE_LOCK_MS = 250
/** Spins between two looks at the wall clock while waiting for a lock. */
const SPINS_PER_CHECK = 1024

// Lock words hold the holder's stamp: its thread id and a sequence number, so
// that a waiter can tell a lock passing between holders (the value changes)
// from a lock whose holder died inside the critical section (the same value,
// for STALE_LOCK_MS of the waiter's own wall clock).
const THREAD = ((threadId & 0x3fff) + 1) << 16
let seq = 0

/** Takes the lock word at `set` (a rate set's, or the revocation table's); spins while another thread holds it (a critical section is well under a microsecond). */
export function lock (i32: Int32Array, set: number): void {
  const stamp = THREAD | (seq = (seq + 1) & 0xffff)
  if (Atomics.compareExchange(i32, set, 0, stamp) === 0) return
  let seen = Atomics.load(i32, set)
  let since = 0
  for (let spins = 1; ; spins++) {
    const held = Atomics.load(i32, set)
    if (held === 0) {
      if (Atomics.compareExchange(i32, set, 0, stamp) === 0) return
    } else if (spins % SPINS_PER_CHECK === 0) {
      const t = Date.now()
      if (held !== seen || since === 0) {
        seen = held
        since = t
      } else if (t - since > STALE_LOCK_MS && Atomics.compareExchange(i32, set, held, stamp) === held) return
    }
  }
}
