// The admin and dashboard listeners' password check: an unknown user name is
// checked against a decoy of a real hash, so that its answer costs what a
// known user's does and answer times do not tell which names exist.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import bcrypt from 'bcryptjs'
import { Authenticator } from '../../core/admin/auth.js'

/** CPU time (user + system, µs) this process spent on `p`. */
async function cpuOf<T> (p: () => Promise<T>): Promise<[T, number]> {
  const before = process.cpuUsage()
  const value = await p()
  const d = process.cpuUsage(before)
  return [value, d.user + d.system]
}

test('an unknown user costs a bcrypt check as a known one does; right, wrong and cached answers', async () => {
  const auth = new Authenticator({ users: [`ann:${bcrypt.hashSync('right', 10)}`], tokens: [] })
  const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`
  // The first bcrypt check starts the process's bcrypt thread, whose start-up
  // costs as much CPU as a check; measure after it.
  assert.equal(await auth.check(basic('ann', 'warm-up')), null)
  const [wrong, known] = await cpuOf(() => auth.check(basic('ann', 'wrong')))
  const [unknownUser, unknown] = await cpuOf(() => auth.check(basic('bob', 'right')))
  assert.equal(wrong, null)
  assert.equal(unknownUser, null)
  // a ratio within one run, not a duration: both are one bcrypt check at cost 10
  assert.ok(unknown > known / 2, `an unknown user cost ${unknown} µs of CPU, a known one ${known} µs`)
  assert.equal(await auth.check(basic('ann', 'right')), 'ann')
  const [cached, again] = await cpuOf(() => auth.check(basic('ann', 'right')))
  assert.equal(cached, 'ann')
  assert.ok(again < known / 2, `a remembered value costs no bcrypt check (${again} against ${known} µs)`)
})
