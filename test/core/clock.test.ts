// core/clock.ts's isoNow: the wall clock as Date's toISOString, cached for the millisecond it was built in.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isoNow } from '../../core/clock.js'

test('isoNow is Date\'s toISOString of this millisecond, and moves with the clock', async () => {
  for (let i = 0; i < 1000; i++) {
    const before = Date.now()
    const t = isoNow()
    const after = Date.now()
    assert.match(t, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    const ms = Date.parse(t)
    assert.ok(ms >= before && ms <= after, `${t} within [${before}, ${after}]`)
  }
  const first = isoNow()
  await new Promise((resolve) => setTimeout(resolve, 5))
  assert.notEqual(isoNow(), first, 'a later millisecond gives a later time')
})
