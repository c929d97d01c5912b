// A balancer picks one server of a group for a request. Groups are per worker,
// but all state a pick depends on (usability, weights, in-flight counts, the
// cursor) lives in shared memory, so every worker balances as one. A new
// strategy implements Balancer (balance.ts) and gets a case here and in
// config/dynamic.ts's BALANCES.
import type { Shm } from '../shm/layout.js'
import type { Balance } from '../config/dynamic.js'
import { LeastConn } from './least-conn.js'
import { RoundRobin } from './round-robin.js'
import { SourceHash } from './source-hash.js'
import type { Balancer, BalancerServer } from './balance.js'

export { type Balancer, type BalancerServer, hash32, mix32 } from './balance.js'

export function createBalancer (kind: Balance, shm: Shm, serviceSlot: number, servers: readonly BalancerServer[]): Balancer {
  switch (kind) {
    case 'roundrobin': return new RoundRobin(shm.i32, serviceSlot, servers)
    case 'leastconn': return new LeastConn(shm, serviceSlot, servers)
    case 'source': return new SourceHash(shm.i32, servers)
    default: {
      const never: never = kind
      throw new Error(`unknown balance ${String(never)}`)
    }
  }
}
