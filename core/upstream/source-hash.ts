// Source-address hashing by rendezvous (highest random weight) hashing: each
// usable server scores hash(client, server) and the highest wins. The score
// depends only on the client address and the server's address, so every
// worker and every restart agree, and adding or removing one server of n moves
// only about 1/n of the clients. Weighted with the logarithmic method
// (score = -weight / ln(u), u uniform in (0,1)).
import { type Balancer, type BalancerServer, hash32, mix32 } from './balance.js'
import { isUsable, weight } from '../shm/server-state.js'

export class SourceHash implements Balancer {
  readonly #i32: Int32Array
  readonly #servers: readonly BalancerServer[]
  readonly #keys: Uint32Array

  constructor (i32: Int32Array, servers: readonly BalancerServer[]) {
    this.#i32 = i32
    this.#servers = servers
    this.#keys = Uint32Array.from(servers, (s) => hash32(s.key))
  }

  pick (now: number, clientHash: number, exclude: number): number {
    let best = -1
    let bestScore = -Infinity
    for (let idx = 0; idx < this.#servers.length; idx++) {
      const slot = this.#servers[idx]!.slot
      if (idx === exclude || !isUsable(this.#i32, slot, now)) continue
      const u = (mix32(clientHash ^ this.#keys[idx]!) + 0.5) / 4294967296
      const score = -weight(this.#i32, slot) / Math.log(u)
      if (score > bestScore) {
        best = idx
        bestScore = score
      }
    }
    return best
  }
}
