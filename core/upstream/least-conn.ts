// Least connections over ALL workers: each worker counts what it has in
// flight per server in its own stripe (C_INFLIGHT), and a pick sums the
// stripes, so it sees what the other workers have in flight. Weighted as
// HAProxy: lowest (inflight+1)/weight. Ties rotate from a shared cursor so
// equal servers share the load evenly.
import { type Balancer, type BalancerServer } from './balance.js'
import { type Shm, C_INFLIGHT, V_CURSOR, serviceBase } from '../shm/layout.js'
import { sumServer } from '../shm/counters.js'
import { isUsable, weight } from '../shm/server-state.js'

export class LeastConn implements Balancer {
  readonly #shm: Shm
  readonly #i32: Int32Array
  readonly #cursor: number
  readonly #servers: readonly BalancerServer[]

  constructor (shm: Shm, serviceSlot: number, servers: readonly BalancerServer[]) {
    this.#shm = shm
    this.#i32 = shm.i32
    this.#cursor = serviceBase(serviceSlot) + V_CURSOR
    this.#servers = servers
  }

  pick (now: number, _clientHash: number, exclude: number): number {
    const servers = this.#servers
    const n = servers.length
    if (n === 0) return -1
    const start = (Atomics.add(this.#i32, this.#cursor, 1) >>> 0) % n
    let best = -1
    let bestLoad = Infinity
    for (let k = 0; k < n; k++) {
      const idx = (start + k) % n
      const slot = servers[idx]!.slot
      if (idx === exclude || !isUsable(this.#i32, slot, now)) continue
      const load = (sumServer(this.#shm, slot, C_INFLIGHT) + 1) / weight(this.#i32, slot)
      if (load < bestLoad) {
        best = idx
        bestLoad = load
      }
    }
    return best
  }
}
