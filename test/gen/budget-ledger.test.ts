// The ledger's windows with a clock the test moves (core/gen/budget/ledger.ts):
// fixed UTC minutes and days, Retry-After to the end of the full window,
// tokens charged when a request ends (to the window it ends in), in flight
// given back once, the bounded table of consumers without a key, and two
// ledgers (threads) on the same records.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Ledger, type Refusal, type Ticket } from '../../core/gen/budget/ledger.js'
import { BudgetRecords } from '../../core/shm/budget-records.js'

const NONE = { rpm: 0, tpm: 0, tpd: 0, maxInFlight: 0 }
const DAY = 86_400_000
const isRefusal = (t: Ticket | Refusal): t is Refusal => 'status' in t

function ledger (start: number): { l: Ledger, at: (ms: number) => void } {
  let now = start
  return { l: new Ledger(['k'], () => now), at: (ms) => { now = ms } }
}

test('rpm: fixed UTC minutes; Retry-After is the seconds to the minute\'s end', () => {
  const { l, at } = ledger(10 * DAY + 15_000) // 15 s into a minute
  const limits = { ...NONE, rpm: 2 }
  assert.ok(!isRefusal(l.admit('k', limits)))
  assert.ok(!isRefusal(l.admit('k', limits)))
  const r = l.admit('k', limits)
  assert.ok(isRefusal(r))
  assert.equal(r.status, 429)
  assert.equal(r.reason, 'rpm')
  assert.equal(r.retryAfter, 45)
  assert.equal(r.code, 'rate_limit_exceeded')
  at(10 * DAY + 59_001)
  assert.equal((l.admit('k', limits) as Refusal).retryAfter, 1, 'never 0')
  at(10 * DAY + 60_000) // the next minute
  assert.ok(!isRefusal(l.admit('k', limits)))
})

test('tpm and tpd: admitted while under, charged at the end (overshoot of one request), refused after', () => {
  const { l, at } = ledger(3 * DAY + 3_600_000)
  const limits = { ...NONE, tpm: 100, tpd: 250 }
  const a = l.admit('k', limits) as Ticket
  const b = l.admit('k', limits) as Ticket // both in flight: neither has used anything yet
  a.end(90)
  b.end(40) // 130 > 100: the overshoot is b's tokens
  b.end(1000) // given back once
  const r = l.admit('k', limits) as Refusal
  assert.equal(r.reason, 'tpm')
  assert.match(r.message, /tpm = 100 tokens per minute \(130 used\)/)
  at(3 * DAY + 3_660_000) // next minute: 130 of the day's 250 used
  const c = l.admit('k', limits) as Ticket
  c.end(120)
  at(3 * DAY + 3_720_000)
  const d = l.admit('k', limits) as Refusal
  assert.equal(d.reason, 'tpd')
  assert.equal(d.retryAfter, (DAY - 3_720_000) / 1000, 'to the end of the UTC day')
  at(4 * DAY)
  assert.ok(!isRefusal(l.admit('k', limits)), 'a new day')
})

test('max_in_flight: refused while full (Retry-After 1), admitted once one ends', () => {
  const { l } = ledger(DAY)
  const limits = { ...NONE, maxInFlight: 1 }
  const a = l.admit('k', limits) as Ticket
  const r = l.admit('k', limits) as Refusal
  assert.equal(r.reason, 'in_flight')
  assert.equal(r.retryAfter, 1)
  a.end(0)
  a.end(0)
  const b = l.admit('k', limits)
  assert.ok(!isRefusal(b))
  assert.ok(isRefusal(l.admit('k', limits)), 'the second end() of a did not free a slot twice')
})

test('consumers without a key share a bounded table: a full set forgets its least recently used idle one, never one in flight, never a key', () => {
  let now = DAY
  // one set of BUDGET_WAYS (8) ways: every consumer without a key lands in it
  const l = new Ledger(['k'], () => now, BudgetRecords.private(1, 1))
  const limits = { ...NONE, rpm: 1 }
  l.admit('k', limits)
  const busy = l.admit('addr:busy', { ...NONE, maxInFlight: 1, rpm: 1 }) as Ticket
  for (let i = 0; i < 7; i++) {
    now++
    const t = l.admit(`addr:${i}`, limits)
    assert.ok(!isRefusal(t))
    t.end(1)
  }
  now++
  assert.ok(isRefusal(l.admit('addr:6', limits)), 'remembered while its way is not needed')
  // a ninth consumer takes the least recently used idle way (addr:0): it starts afresh there
  now++
  const fresh = l.admit('addr:new', limits)
  assert.ok(!isRefusal(fresh))
  fresh.end(1)
  now++
  assert.ok(!isRefusal(l.admit('addr:0', limits)), 'forgotten: fresh windows')
  assert.ok(isRefusal(l.admit('k', limits)), 'the key\'s window is kept')
  const inFlight = l.admit('addr:busy', { ...NONE, maxInFlight: 1, rpm: 1 })
  assert.ok(isRefusal(inFlight) && inFlight.reason === 'in_flight', 'a consumer with a request in flight is kept')
  busy.end(0)
})

test('a set whose every way has a request in flight: a newcomer gets a 503 naming the table, nobody loses a count', () => {
  const l = new Ledger([], () => DAY, BudgetRecords.private(0, 1))
  const limits = { ...NONE, maxInFlight: 5 }
  const held = Array.from({ length: 8 }, (_, i) => l.admit(`user:${i}`, limits) as Ticket)
  const r = l.admit('user:late', limits)
  assert.ok(isRefusal(r))
  assert.equal(r.status, 503)
  assert.equal(r.reason, 'table_full')
  assert.match(r.message, /consumer user:late has no budget record now: the 8 consumers without a key that share its place/)
  for (let i = 0; i < 8; i++) assert.equal(l.used(`user:${i}`, limits).inFlight, 1)
  held[3]!.end(5)
  assert.ok(!isRefusal(l.admit('user:late', limits)), 'a way whose request ended is given to it')
  assert.equal(l.used('user:3', limits).inFlight, 0, 'user:3 is forgotten: nothing in flight, fresh windows')
})

test('two ledgers on the same records (the control plane and a worker) count as one; a ticket ends in either', () => {
  const records = BudgetRecords.private(1, 4)
  const control = new Ledger(['k'], () => DAY, records)
  const worker = new Ledger(['k'], () => DAY, records)
  const limits = { ...NONE, rpm: 3, tpm: 100 }
  const a = worker.admit('k', limits, 50) as Ticket
  const b = control.admit('k', limits, 50) as Ticket
  const r = worker.admit('k', limits, 50)
  assert.ok(isRefusal(r) && r.reason === 'tpm', 'the reservations of both count: 100 reserved of 100')
  // the control plane takes over the worker's ticket (Budget.adopt) and charges it
  control.ticket('k', limits, 50, a.minute, a.day).end(7)
  b.end(3)
  assert.deepEqual(worker.used('k', limits), { minute: a.minute, day: a.day, requests: 2, minuteTokens: 10, dayTokens: 10, inFlight: 0 })
  assert.ok(!isRefusal(worker.admit('k', limits, 40)))
  const over = control.admit('k', limits, 40)
  assert.ok(isRefusal(over) && over.reason === 'rpm', 'rpm = 3 across both')
})

test('reservations: the requests in flight count what they may use until they end, then what they used', () => {
  const { l } = ledger(5 * DAY)
  const limits = { ...NONE, tpm: 100 }
  // 30 reserved each (max_tokens + prompt bytes): admitted at 0, 30, 60, 90 in flight; the fifth is refused
  const t = [1, 2, 3, 4].map(() => l.admit('k', limits, 30) as Ticket)
  const r = l.admit('k', limits, 30)
  assert.ok(isRefusal(r))
  assert.match(r.message, /tpm = 100 tokens per minute \(120 used\)/)
  assert.equal(r.retryAfter, 1, 'full only with reservations: room may come back when they end')
  // they used 10 each: 40 charged, room again
  for (const x of t) x.end(10)
  assert.equal(l.used('k', limits).minuteTokens, 40)
  assert.ok(!isRefusal(l.admit('k', limits, 30)))
  assert.equal(l.used('k', limits).minuteTokens, 70)
})

test('leases: past its lease a request waits (once the last round had room); a bell round\'s grant outlives the next periodic round', () => {
  const { l } = ledger(6 * DAY)
  const limits = { ...NONE, rpm: 10, tpm: 100 }
  const r = l.admit('k', limits, 20, true)
  assert.ok(isRefusal(r) && r.held && r.wait && r.retryAfter === 1, 'a lease of 0: held, may wait')
  assert.equal(l.leaseAsk('k', limits, false, 2) === null, false, 'a periodic round serves a request waiting too')
  const bell = l.leaseAsk('k', limits, true, 2)
  assert.equal(bell, null, 'the periodic round took the request\'s want')
  // a bell round for a new request: rpm asks a chunk (10 / (4 × 2) rounded up), tpm the reservation waiting
  assert.ok(isRefusal(l.admit('k', limits, 20, true)))
  const ask = l.leaseAsk('k', limits, true, 2)!
  assert.deepEqual(ask.numbers, [10, 0, 2, 0, 100, 0, 20, 0, 0, 0, 0, 0])
  l.setLease(ask, limits, [2, 0, 20, 0, 0, 0])
  // a periodic round before the woken request re-admits keeps the grant whole (it would give back an idle lease)
  const periodic = l.leaseAsk('k', limits, false, 2)!
  assert.deepEqual(periodic.numbers.slice(0, 8), [10, 2, 2, 0, 100, 20, 20, 0])
  l.setLease(periodic, limits, [2, 0, 20, 0, 0, 0])
  assert.ok(!isRefusal(l.admit('k', limits, 20, true)))
  // past the lease again and the other nodes hold the rest (the last round granted less than asked): refused at once
  assert.ok(isRefusal(l.admit('k', limits, 20, true)))
  const more = l.leaseAsk('k', limits, true, 2)!
  assert.deepEqual(more.numbers.slice(0, 8), [10, 2, 3, 1, 100, 20, 40, 20])
  l.setLease(more, limits, [2, 8, 20, 70, 0, 0])
  const held = l.admit('k', limits, 20, true)
  assert.ok(isRefusal(held) && held.held && !held.wait)
  assert.match(held.message, /reached this node's share of its limit of tpm = 100 tokens per minute \(90 used in the cluster\)/)
})
