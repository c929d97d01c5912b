// Balancing algorithms over real shared memory, with two "workers" sharing it.
import { strict as assert } from 'node:assert'
import { test } from 'node:test'
import { ADMIN_MAINT, C_INFLIGHT, S_ADMIN, serverBase } from '../../core/shm/layout.js'
import { createShm } from '../../core/shm/buffer.js'
import { Stripe } from '../../core/shm/counters.js'
import { isUsable, recordFailure } from '../../core/shm/server-state.js'
import { createBalancer, hash32 } from '../../core/upstream/balancer.js'
import { smoothSequence } from '../../core/upstream/round-robin.js'
import { SlotRegistry } from '../../core/control/slots.js'
import { parseConfig } from '../../core/configure.js'

function setup (weights: number[], balance = 'roundrobin') {
  const shm = createShm(2)
  const servers = weights.map((w, i) => `[[services.s.servers]]\nname = "s${i}"\naddress = "10.0.0.${i + 1}:80"\nweight = ${w}\n`).join('')
  const conf = parseConfig(`[entrypoints.web]\naddress = "127.0.0.1:1"\n[services.s]\nbalance = "${balance}"\n${servers}`)
  const slots = new SlotRegistry(shm).apply(conf)
  const group = conf.services[0]!.servers.map((s) => ({ slot: slots.servers[`s/${s.name}`]!, key: s.address }))
  const kind = conf.services[0]!.balance
  // two balancers over the same shared memory, as two workers would have
  return { shm, group, a: createBalancer(kind, shm, slots.services.s!, group), b: createBalancer(kind, shm, slots.services.s!, group) }
}

test('smooth weighted round robin interleaves as nginx does', () => {
  assert.deepEqual([...smoothSequence([5, 1, 1])], [0, 0, 1, 0, 2, 0, 0])
  assert.deepEqual([...smoothSequence([2, 2])], [0, 1])
  assert.deepEqual([...smoothSequence([0, 3])], [1])
})

test('round robin across two workers shares one cursor: exact weighted shares', () => {
  const { a, b } = setup([3, 1])
  const picks = [0, 0]
  for (let i = 0; i < 400; i++) picks[(i % 3 === 0 ? a : b).pick(Date.now() | 0, 0, -1)]!++
  assert.deepEqual(picks, [300, 100])
})

test('least connections counts in-flight requests of all workers', () => {
  const { shm, group, a, b } = setup([1, 1, 1], 'leastconn')
  const t = Date.now() | 0
  // each worker counts its own requests in its own stripe, as DataPlane.claimServer does
  const [stripeA, stripeB] = [new Stripe(shm, 0), new Stripe(shm, 1)]
  const first = a.pick(t, 0, -1)
  stripeA.addServer(group[first]!.slot, C_INFLIGHT) // worker a holds a request on it
  const second = b.pick(t, 0, -1)
  assert.notEqual(second, first)
  stripeB.addServer(group[second]!.slot, C_INFLIGHT)
  const third = a.pick(t, 0, -1)
  assert.ok(third !== first && third !== second)
})

test('source hash: same server in every worker, and adding a server moves about 1/n of the clients, only to it', () => {
  const three = setup([1, 1, 1], 'source')
  const four = setup([1, 1, 1, 1], 'source')
  const t = Date.now() | 0
  let moved = 0
  const n = 4000
  for (let i = 0; i < n; i++) {
    const h = hash32(`192.0.${i >> 8}.${i & 255}`)
    const p = three.a.pick(t, h, -1)
    assert.equal(three.b.pick(t, h, -1), p)
    const q = four.a.pick(t, h, -1)
    if (q !== p) {
      moved++
      assert.equal(q, 3, 'a moved client goes to the new server')
    }
  }
  assert.ok(moved > n * 0.2 && moved < n * 0.3, `moved ${moved} of ${n}`)
})

test('servers that are down, drained or weight 0 are skipped', () => {
  const { shm, group, a } = setup([1, 1])
  const t = Date.now() | 0
  shm.i32[serverBase(group[0]!.slot) + S_ADMIN] = ADMIN_MAINT
  assert.equal(isUsable(shm.i32, group[0]!.slot, t), false)
  for (let i = 0; i < 10; i++) assert.equal(a.pick(t, 0, -1), 1)
  assert.equal(a.pick(t, 0, 1), -1)
})

/** Picks `n` times, alternating irregularly between the two workers' balancers; counts per server. */
function shares (a: ReturnType<typeof setup>['a'], b: ReturnType<typeof setup>['b'], n: number, t: number): number[] {
  const picks: number[] = []
  for (let i = 0; i < n; i++) {
    const idx = ((i * 7) % 5 < 2 ? a : b).pick(t, 0, -1)
    picks[idx] = (picks[idx] ?? 0) + 1
  }
  return picks
}

test('a server down spreads its share over the others in proportion to their weights, exactly across two workers', () => {
  const t = Date.now() | 0
  // 3 equal servers, one out (maintenance): the other two 50/50 (the old skip gave 2/3 to the next one)
  const eq = setup([1, 1, 1])
  eq.shm.i32[serverBase(eq.group[0]!.slot) + S_ADMIN] = ADMIN_MAINT
  const p = shares(eq.a, eq.b, 10_000, t)
  assert.equal(p[0], undefined)
  assert.ok(Math.abs(p[1]! - 5_000) <= 1 && Math.abs(p[2]! - 5_000) <= 1, `shares ${p}`)
  // weights 3:2:1, the first passively marked down (a time-limited mark, no admin change): 2:1
  const w = setup([3, 2, 1])
  const svc = 0
  for (let i = 0; i < 3; i++) recordFailure(w.shm.i32, w.group[0]!.slot, svc, t, 1, 60_000)
  const q = shares(w.a, w.b, 10_000, t)
  assert.equal(q[0], undefined)
  assert.ok(Math.abs(q[1]! / q[2]! - 2) < 0.02 * 2, `shares ${q}`)
  // it comes back when the mark ends: 3:2:1 again
  const later = (t + 61_000) | 0
  const r = shares(w.a, w.b, 6_000, later)
  assert.deepEqual(r, [3_000, 2_000, 1_000])
})
