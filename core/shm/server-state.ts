// Per-server shared state: administrative state, active-check verdict, passive
// failure marking and effective weight. Written by any thread with Atomics;
// every worker sees a change at its next pick. (In-flight counts are striped
// gauges, C_INFLIGHT in core/shm/layout.ts.)
import {
  ADMIN_READY, CHECK_UP, S_ADMIN, S_CHECK, S_DOWN_UNTIL, S_FAILS, S_FAIL_START, S_WEIGHT,
  V_STATE_VERSION, serverBase, serviceBase,
} from './layout.js'

/** A server takes new requests when it is ready, passes its checks and is not passively marked down. */
export function isUsable (i32: Int32Array, slot: number, now: number): boolean {
  const b = serverBase(slot)
  if (i32[b + S_ADMIN] !== ADMIN_READY || i32[b + S_CHECK] !== CHECK_UP || i32[b + S_WEIGHT] === 0) return false
  const until = i32[b + S_DOWN_UNTIL]!
  return until === 0 || ((now - until) | 0) >= 0
}

export function weight (i32: Int32Array, slot: number): number {
  return i32[serverBase(slot) + S_WEIGHT]!
}

/**
 * Passive marking (nginx max_fails/fail_timeout): `maxFails` failures within
 * `failTimeoutMs` take the server out for `failTimeoutMs`. Returns true when
 * this failure took it out. Races between workers can at worst count a
 * failure in a window that another worker just restarted.
 */
export function recordFailure (i32: Int32Array, slot: number, serviceSlot: number, now: number, maxFails: number, failTimeoutMs: number): boolean {
  if (maxFails === 0) return false
  const b = serverBase(slot)
  const start = Atomics.load(i32, b + S_FAIL_START)
  if (start === 0 || ((now - start) | 0) > failTimeoutMs) {
    Atomics.store(i32, b + S_FAIL_START, now | 1) // never 0: 0 means "no window"
    Atomics.store(i32, b + S_FAILS, 0)
  }
  const fails = Atomics.add(i32, b + S_FAILS, 1) + 1
  if (fails !== maxFails) return false
  Atomics.store(i32, b + S_DOWN_UNTIL, (now + failTimeoutMs) | 1)
  Atomics.store(i32, b + S_FAILS, 0)
  Atomics.store(i32, b + S_FAIL_START, 0)
  bumpServiceState(i32, serviceSlot)
  return true
}

/** Sets a server's admin state (ADMIN_*) and tells the service's balancers (runtime socket and config API alike). */
export function setAdminState (i32: Int32Array, slot: number, serviceSlot: number, state: number): void {
  Atomics.store(i32, serverBase(slot) + S_ADMIN, state)
  bumpServiceState(i32, serviceSlot)
}

/** Tells every worker's balancer that usability or weights of this service's servers changed. */
export function bumpServiceState (i32: Int32Array, serviceSlot: number): void {
  Atomics.add(i32, serviceBase(serviceSlot) + V_STATE_VERSION, 1)
}

export function serviceStateVersion (i32: Int32Array, serviceSlot: number): number {
  return i32[serviceBase(serviceSlot) + V_STATE_VERSION]!
}
