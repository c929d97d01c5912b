// Smooth weighted round robin (nginx's algorithm) shared by all workers without
// a lock: the smooth sequence for the current weights is computed once per
// weight change (length = sum of weights / gcd), and every pick takes the next
// position from one shared atomic cursor. Servers that cannot take traffic are
// skipped by moving on in the sequence, so their share spreads over the others.
import { type Balancer, type BalancerServer } from './balance.js'
import { V_CURSOR, serviceBase } from '../shm/layout.js'
import { isUsable, serviceStateVersion, weight } from '../shm/server-state.js'

export class RoundRobin implements Balancer {
  readonly #i32: Int32Array
  readonly #serviceSlot: number
  readonly #cursor: number
  readonly #servers: readonly BalancerServer[]
  #seq: Int32Array = new Int32Array(0)
  #version = -1

  constructor (i32: Int32Array, serviceSlot: number, servers: readonly BalancerServer[]) {
    this.#i32 = i32
    this.#serviceSlot = serviceSlot
    this.#cursor = serviceBase(serviceSlot) + V_CURSOR
    this.#servers = servers
  }

  pick (now: number, _clientHash: number, exclude: number): number {
    const version = serviceStateVersion(this.#i32, this.#serviceSlot)
    if (version !== this.#version) this.#rebuild(version)
    const seq = this.#seq
    const len = seq.length
    if (len === 0) return -1
    const n = Atomics.add(this.#i32, this.#cursor, 1) >>> 0
    for (let k = 0; k < len; k++) {
      const idx = seq[(n + k) % len]!
      if (idx !== exclude && isUsable(this.#i32, this.#servers[idx]!.slot, now)) return idx
    }
    return -1
  }

  #rebuild (version: number): void {
    this.#version = version
    this.#seq = smoothSequence(this.#servers.map((s) => weight(this.#i32, s.slot)))
  }
}

function gcd (a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b]
  return a
}

/** nginx's smooth WRR order for these weights: e.g. [5,1,1] → 0 0 1 0 2 0 0. */
export function smoothSequence (weights: readonly number[]): Int32Array {
  const g = weights.reduce((a, w) => (w > 0 ? gcd(a, w) : a), 0)
  if (g === 0) return new Int32Array(0)
  const w = weights.map((x) => (x > 0 ? x / g : 0))
  const total = w.reduce((a, b) => a + b, 0)
  const current = new Array<number>(w.length).fill(0)
  const seq = new Int32Array(total)
  for (let i = 0; i < total; i++) {
    let best = -1
    for (let j = 0; j < w.length; j++) {
      if (w[j] === 0) continue
      current[j]! += w[j]!
      if (best < 0 || current[j]! > current[best]!) best = j
    }
    current[best]! -= total
    seq[i] = best
  }
  return seq
}
