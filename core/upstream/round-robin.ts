// Smooth weighted round robin (nginx's algorithm) shared by all workers without
// a lock. The smooth sequence is computed over the servers that can take
// traffic now (length = sum of their weights / gcd), and every pick takes the
// next position from one shared atomic cursor. When a server goes down or comes
// back the sequence is rebuilt over the usable ones, so the others keep shares
// in proportion to their weights (skipping a down server's positions instead
// would hand all of its share to the server after it in the sequence). Every
// worker builds the same sequence from the same shared state, so with the one
// cursor the shares are exact across workers.
//
// Usability is read for every server on every pick (O(n), as nginx's pick): a
// passive mark-down ends by time, with no version bump to announce it.
import { type Balancer, type BalancerServer } from './balance.js'
import { V_CURSOR, serviceBase } from '../shm/layout.js'
import { isUsable, serviceStateVersion, weight } from '../shm/server-state.js'

export class RoundRobin implements Balancer {
  readonly #i32: Int32Array
  readonly #serviceSlot: number
  readonly #cursor: number
  readonly #servers: readonly BalancerServer[]
  /** 1 where the server was usable when #seq was built */
  readonly #usable: Uint8Array
  #seq: Int32Array = new Int32Array(0)
  #version = -1

  constructor (i32: Int32Array, serviceSlot: number, servers: readonly BalancerServer[]) {
    this.#i32 = i32
    this.#serviceSlot = serviceSlot
    this.#cursor = serviceBase(serviceSlot) + V_CURSOR
    this.#servers = servers
    this.#usable = new Uint8Array(servers.length)
  }

  pick (now: number, _clientHash: number, exclude: number): number {
    const i32 = this.#i32
    const servers = this.#servers
    const usable = this.#usable
    const version = serviceStateVersion(i32, this.#serviceSlot)
    let changed = version !== this.#version
    for (let i = 0; i < servers.length; i++) {
      const u = isUsable(i32, servers[i]!.slot, now) ? 1 : 0
      if (usable[i] !== u) {
        usable[i] = u
        changed = true
      }
    }
    if (changed) this.#rebuild(version)
    const seq = this.#seq
    const len = seq.length
    if (len === 0) return -1
    const n = Atomics.add(i32, this.#cursor, 1) >>> 0
    for (let k = 0; k < len; k++) {
      const idx = seq[(n + k) % len]!
      if (idx !== exclude) return idx
    }
    return -1
  }

  #rebuild (version: number): void {
    this.#version = version
    this.#seq = smoothSequence(this.#servers.map((s, i) => (this.#usable[i] === 1 ? weight(this.#i32, s.slot) : 0)))
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
