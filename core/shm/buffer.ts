// The one SharedArrayBuffer of a process, laid out by core/shm/layout.ts:
// allocated once by the control plane (createShm, which sizes the layout from
// the configuration) and attached by every data-plane worker (attachShm, which
// sizes its own thread's layout bindings from the buffer's header).

import {
  BR_WORDS, type BudgetRoom, budgetRecords, type Capacities, CLH_NODES, CLUSTER_BASE, DEFAULT_CAPACITIES, H_BUDGET_KEYED,
  H_BUDGET_SETS, H_CAP_ROUTERS, H_CAP_SERVERS, H_CAP_SERVICES, H_CLUSTER_SETS, H_LAST_RELOAD_OK, H_MAGIC, H_REVOKE_SETS,
  H_VERSION, H_WORKERS, HEADER_WORDS, I32_WORDS, LAYOUT_VERSION, MAGIC, NO_BUDGETS, REVOKE_ENTRIES_DEFAULT, REVOKE_SETS,
  revocationSets, setCapacities, type Shm, STRIPE_WORDS,
} from './layout.js'

/** Byte offset of the f64 words: after the i32 words, 8-byte aligned. */
function f64Offset (): number {
  return Math.ceil((I32_WORDS * 4) / 8) * 8
}

/** Allocates and initialises the shared memory for `workers` data-plane workers (one per process: it sizes the layout). */
export function createShm (workers: number, caps: Capacities = DEFAULT_CAPACITIES, clusterSets = 0, revocations = REVOKE_ENTRIES_DEFAULT, budget: BudgetRoom = NO_BUDGETS): Shm {
  setCapacities(caps, workers, clusterSets, revocationSets(revocations), budget)
  const stripes = workers + 1
  const buffer = new SharedArrayBuffer(f64Offset() + (stripes * STRIPE_WORDS + budgetRecords(budget) * BR_WORDS) * 8)
  const i32 = new Int32Array(buffer, 0, HEADER_WORDS)
  i32[H_CAP_SERVICES] = caps.services
  i32[H_CAP_SERVERS] = caps.servers
  i32[H_CAP_ROUTERS] = caps.routers
  i32[H_CLUSTER_SETS] = clusterSets
  i32[H_REVOKE_SETS] = REVOKE_SETS
  i32[H_BUDGET_KEYED] = budget.keyed
  i32[H_BUDGET_SETS] = budget.sets
  const shm = attachShm(buffer, workers)
  shm.i32[H_MAGIC] = MAGIC
  shm.i32[H_VERSION] = LAYOUT_VERSION
  shm.i32[H_WORKERS] = workers
  shm.i32[H_LAST_RELOAD_OK] = 1
  if (clusterSets > 0) shm.i32[CLUSTER_BASE + CLH_NODES] = 1
  return shm
}

/** Wraps an existing buffer (in a worker: sizes this thread's layout from its header); checks that both sides agree on the layout. */
export function attachShm (buffer: SharedArrayBuffer, workers: number): Shm {
  const header = new Int32Array(buffer, 0, HEADER_WORDS)
  setCapacities({ services: header[H_CAP_SERVICES]!, servers: header[H_CAP_SERVERS]!, routers: header[H_CAP_ROUTERS]! }, workers, header[H_CLUSTER_SETS]!, header[H_REVOKE_SETS]!,
    { keyed: header[H_BUDGET_KEYED]!, sets: header[H_BUDGET_SETS]! })
  const i32 = new Int32Array(buffer, 0, I32_WORDS)
  const f64 = new Float64Array(buffer, f64Offset())
  if (i32[H_MAGIC] !== 0 && (i32[H_MAGIC] !== MAGIC || i32[H_VERSION] !== LAYOUT_VERSION)) {
    throw new Error(`shared memory layout mismatch (version ${i32[H_VERSION]}, expected ${LAYOUT_VERSION})`)
  }
  return { buffer, i32, f64, workers }
}
