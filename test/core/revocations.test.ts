// The shared session revocation table (core/shm/revocations.ts) on its own: a
// revoked key refuses sessions born until the revocation and none born after,
// entries are over at their end and their ways reused, two choices fill the
// table evenly, and a full table never forgets a live revocation: it moves its
// epoch instead (every session born until then is refused).
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { ADDED, KEPT, REDUNDANT, RESET, Revocations, keyHex, parseKeyHex, revocationKey, revocationWords } from '../../core/shm/revocations.js'

const table = (sets: number): Revocations => new Revocations(new Int32Array(new SharedArrayBuffer(revocationWords(sets) * 4)), 0, sets)
const key = (): [number, number] => revocationKey(randomBytes(16).toString('hex'))
const NOW = 1_800_000_000 // unix s

test('a revoked key refuses its sessions born until the revocation, until the entry ends', () => {
  const t = table(8)
  const [ka, kb] = key()
  const gen = t.gen()
  assert.equal(t.revoked(ka, kb, NOW - 10, NOW), false)
  assert.equal(t.add({ ka, kb, at: NOW, exp: NOW + 100 }, NOW), ADDED)
  assert.notEqual(t.gen(), gen, 'a change moves GEN: readers look again')
  assert.equal(t.revoked(ka, kb, NOW - 10, NOW), true)
  assert.equal(t.revoked(ka, kb, NOW, NOW), true, 'born in the second of the revocation')
  assert.equal(t.revoked(ka, kb, NOW + 1, NOW + 1), false, 'born after it: a new session of the same subject passes')
  assert.equal(t.revoked(ka, kb, NOW - 10, NOW + 100), false, 'the entry is over with the session')
  const [oa, ob] = key()
  assert.equal(t.revoked(oa, ob, NOW - 10, NOW), false, 'another key')
  assert.equal(t.add({ ka, kb, at: NOW, exp: NOW + 100 }, NOW), REDUNDANT, 'the same entry again changes nothing')
  assert.equal(t.add({ ka, kb, at: NOW + 5, exp: NOW + 200 }, NOW + 5), KEPT, 'the same key again keeps the later times')
  assert.equal(t.revoked(ka, kb, NOW + 3, NOW + 150), true)
  assert.equal(t.add({ ka, kb, at: NOW, exp: NOW - 1 }, NOW), REDUNDANT, 'an entry already over')
  assert.equal(t.live(NOW), 1)
})

test('keys as 16 hex digits (Redis members, the revocation file) go both ways', () => {
  const [ka, kb] = key()
  assert.deepEqual(parseKeyHex(keyHex(ka, kb)), [ka, kb])
  assert.equal(parseKeyHex('00000000ffffffff'), null, 'KEY_A is never even (0 marks a free way)')
  assert.equal(parseKeyHex('xyz'), null)
})

test('two choices fill the table evenly: past 85% of its entries before the first add finds both sets full', () => {
  for (let round = 0; round < 5; round++) {
    const t = table(256) // 2,048 entries
    let added = 0
    while (t.add({ ...pair(key()), at: NOW, exp: NOW + 3600 }, NOW) === ADDED) added++
    assert.ok(added > 0.85 * 2048, `round ${round}: ${added} of 2048 entries before the table was full`)
  }
})

test('entries that are over free their ways: a table never fills with ended sessions', () => {
  const t = table(8) // 64 entries
  for (let i = 0; i < 10 * 64; i++) {
    const at = NOW + i
    assert.notEqual(t.add({ ...pair(key()), at, exp: at + 10 }, at), RESET, `add ${i}`)
  }
  assert.ok(t.live(NOW + 640) <= 10)
  assert.equal(t.resets(), 0)
})

test('full: nothing live is forgotten; the epoch refuses every session born until then, and only those', () => {
  const t = table(8)
  const revoked: Array<[number, number]> = []
  let result = ADDED
  while (result !== RESET) {
    const k = key()
    result = t.add({ ...pair(k), at: NOW, exp: NOW + 3600 }, NOW)
    revoked.push(k)
  }
  assert.ok(revoked.length > 50, `${revoked.length} adds`)
  assert.equal(t.epoch(), NOW)
  assert.equal(t.resets(), 1)
  for (const [ka, kb] of revoked) assert.equal(t.revoked(ka, kb, NOW - 1, NOW + 1), true, 'every revoked session is still refused')
  const [oa, ob] = key()
  assert.equal(t.revoked(oa, ob, NOW - 1, NOW + 1), true, 'a session never revoked but born before the epoch: refused too (its user logs in again)')
  assert.equal(t.revoked(oa, ob, NOW + 1, NOW + 1), false, 'a session born after it passes')
  assert.equal(t.live(NOW + 1), 0, 'the entries the epoch covers are freed')
  assert.equal(t.add({ ...pair(key()), at: NOW - 5, exp: NOW + 3600 }, NOW + 1), REDUNDANT, 'what the epoch covers is not added again')
  assert.equal(t.add({ ...pair(key()), at: NOW + 1, exp: NOW + 3600 }, NOW + 1), ADDED)
  assert.equal(t.setEpoch(NOW - 100), false, 'an earlier epoch changes nothing')
})

function pair ([ka, kb]: [number, number]): { ka: number, kb: number } {
  return { ka, kb }
}
