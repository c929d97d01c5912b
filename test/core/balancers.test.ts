// Balancing algorithms over real shared memory, with two "workers" sharing it.
import { strict as assert } from 'node:assert'
import { test } from 'node:test'
import { ADMIN_MAINT, C_INFLIGHT, S_ADMIN, createShm, serverBase } from '../../core/shm/layout.js'
import { Stripe } from '../../core/shm/counters.js'
import { isUsable } from '../../core/shm/server-state.js'
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
