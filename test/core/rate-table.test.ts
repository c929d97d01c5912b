// The shared rate table (core/shm/rate-table.ts) on its own: exact counts with
// several threads hitting the same keys at once, and a full table that evicts
// (expired entries first, then the least recently used) without growing or throwing.
import { strict as assert } from 'node:assert'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'
import { RATE_ENTRIES, RATE_WAYS, RS_LOCK } from '../../core/shm/layout.js'
import { KeyHasher, RateTable, keyA, keyB, rateTableWords } from '../../core/shm/rate-table.js'
import { STALE_LOCK_MS } from '../../core/shm/shm-lock.js'
import { createShm } from '../../core/shm/buffer.js'
import { waitFor } from '../helpers.js'

const T0 = 1_000_000

function small (sets: number): RateTable {
  return new RateTable(new Int32Array(new SharedArrayBuffer(rateTableWords(sets) * 4)), 0, sets)
}

test('the table in the shared memory holds 100k entries (the seed\'s "size 100k")', () => {
  assert.equal(RATE_ENTRIES, 102_400)
  const shm = createShm(1)
  const t = new RateTable(shm.i32)
  assert.equal(t.window(3, 5, T0, 10_000, 100, 30_000), 0)
  assert.equal(t.live(T0), 1)
})

test('sliding window: more than `limit` in the window is refused, with the wait until the estimate allows one again', () => {
  const t = small(4)
  for (let i = 0; i < 100; i++) assert.equal(t.window(1, 1, T0 + i, 10_000, 100, 30_000), 0)
  const r = t.window(1, 1, T0 + 100, 10_000, 100, 30_000)
  assert.ok(r < 0 && -r <= 10_000 + 100, `wait ${-r}`)
  // one period later the previous window still weighs: 101 counted × (1 - elapsed share) ...
  assert.ok(t.window(1, 1, T0 + 10_050, 10_000, 100, 30_000) < 0)
  // ... and two periods later nothing does
  assert.equal(t.window(1, 1, T0 + 20_100, 10_000, 100, 30_000), 0)
})

test('bucket: capacity, drain per ms, refusals leave the level unchanged', () => {
  const t = small(4)
  // 2 requests of capacity, draining 1 request per second (1 unit per ms)
  assert.equal(t.bucket(1, 1, T0, 2000, 1, 30_000), 0)
  assert.equal(t.bucket(1, 1, T0, 2000, 1, 30_000), 1000)
  assert.equal(t.bucket(1, 1, T0, 2000, 1, 30_000), -1000)
  assert.equal(t.bucket(1, 1, T0 + 500, 2000, 1, 30_000), -500)
  assert.equal(t.bucket(1, 1, T0 + 1000, 2000, 1, 30_000), 1000)
})

test('exact across threads: 4 threads × 20,000 hits on 10 keys with a limit of 1000 each accept exactly 10,000', async () => {
  const sets = 16
  const buffer = new SharedArrayBuffer(rateTableWords(sets) * 4)
  for (const algo of ['window', 'bucket'] as const) {
    new Int32Array(buffer).fill(0)
    const start = new Int32Array(new SharedArrayBuffer(8)) // [0] the start signal, [1] threads waiting for it
    const url = new URL('./rate-table.worker.js', import.meta.url)
    const results = Array.from({ length: 4 }, () => {
      const w = new Worker(url, { workerData: { buffer, sets, hits: 20_000, keys: 10, algo, now: T0, start } })
      return new Promise<number>((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
    })
    await waitFor(() => Atomics.load(start, 1) === 4, 'the 4 threads to wait for the start signal', 10_000, 5)
    Atomics.store(start, 0, 1)
    Atomics.notify(start, 0)
    const accepted = (await Promise.all(results)).reduce((a, b) => a + b, 0)
    assert.equal(accepted, 10 * 1000, algo)
  }
})

test('a full table reuses expired entries first, then the least recently used; it never grows nor throws', () => {
  const t = small(1) // one set of RATE_WAYS entries
  const P = 1_000_000 // a long window: counts persist through the test, entries expire by their TTL
  for (let k = 1; k <= RATE_WAYS; k++) t.window(k * 2 + 1, 0, T0 + k, P, 1, 30_000)
  assert.equal(t.live(T0 + 100), RATE_WAYS)
  // key 3 (the oldest) is used again: it becomes the most recent
  assert.ok(t.window(3, 0, T0 + 200, P, 1, 30_000) < 0)
  // a new key evicts the least recently used, key 5, not key 3
  assert.equal(t.window(1001, 0, T0 + 300, P, 1, 30_000), 0)
  assert.ok(t.window(3, 0, T0 + 301, P, 1, 30_000) < 0, 'key 3 kept its count')
  assert.equal(t.window(5, 0, T0 + 302, P, 1, 30_000), 0, 'key 5 was evicted and starts over')
  // entries of keys 7.. expire 30 s after their last use; at T0 + 30_010 those are free first
  const later = T0 + 30_010
  assert.ok(t.window(3, 0, later - 20, P, 1, 30_000) < 0) // keep key 3 alive
  assert.equal(t.window(2001, 0, later, P, 1, 30_000), 0)
  assert.ok(t.window(3, 0, later + 1, P, 1, 30_000) < 0, 'a live entry was not evicted while expired ones were free')
  // a flood of new keys: the set stays at RATE_WAYS entries and every call answers
  for (let k = 0; k < 10_000; k++) assert.equal(t.window(k * 2 + 100_001, 0, later + 2 + k, P, 1, 30_000), 0)
  assert.equal(t.live(later + 20_000), RATE_WAYS)
})

test('key hashing: two independent 32-bit hashes, and instance seeds separate middlewares', () => {
  const h = new KeyHasher()
  const seen = new Set<string>()
  for (let i = 0; i < 100_000; i++) {
    h.hash(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)
    seen.add(`${h.a}:${h.b}`)
  }
  assert.equal(seen.size, 100_000)
  h.hash('192.0.2.1')
  assert.notEqual(keyA(h.a, 1), keyA(h.a, 2))
  assert.equal(keyA(h.a, 1) & 1, 1) // never 0: 0 marks an unused entry
  assert.notEqual(keyB(h.b, 1), keyB(h.b, 2))
})

test('a lock left by a thread that died inside its critical section is taken over (STALE_LOCK_MS), not waited on forever', () => {
  const t = small(1)
  t.i32[RS_LOCK] = 0x7fff_0001 // a stamp no live thread holds
  const start = Date.now()
  assert.equal(t.window(3, 0, T0, 10_000, 5, 30_000), 0)
  const waited = Date.now() - start
  assert.ok(waited >= STALE_LOCK_MS && waited < STALE_LOCK_MS + 1000, `waited ${waited} ms`)
  assert.equal(t.i32[RS_LOCK], 0, 'released after use')
})
