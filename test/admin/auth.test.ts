// The admin and dashboard listeners' password check: every check costs the
// same whatever the user name, known or not, and whatever the mix of hash
// kinds, so answer times do not tell which names exist; a full bcrypt queue
// answers 503, as basicAuth does.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { test } from 'node:test'
import bcrypt from 'bcryptjs'
import { Authenticator } from '../../core/admin/auth.js'
import { request, simpleConfig, startBackend } from '../helpers.js'
import { startAdminLb } from './util.js'

const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`

/** CPU time (user + system, µs) this process spent on `p`. */
async function cpuOf<T> (p: () => Promise<T>): Promise<[T, number]> {
  const before = process.cpuUsage()
  const value = await p()
  const d = process.cpuUsage(before)
  return [value, d.user + d.system]
}

test('an unknown user costs a bcrypt check as a known one does; right, wrong and cached answers', async () => {
  const auth = new Authenticator({ users: [`ann:${bcrypt.hashSync('right', 10)}`], tokens: [] })
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

test('with a bcrypt user beside a {SHA} one, both users and an unknown name cost one bcrypt check', async () => {
  const sha = `{SHA}${createHash('sha1').update('bobs').digest('base64')}`
  const auth = new Authenticator({ users: [`ann:${bcrypt.hashSync('anns', 10)}`, `bob:${sha}`], tokens: [] })
  assert.equal(await auth.check(basic('ann', 'warm-up')), null) // starts the bcrypt thread
  const cost: Record<string, number> = {}
  for (const user of ['ann', 'bob', 'dan']) {
    const [who, us] = await cpuOf(() => auth.check(basic(user, 'wrong')))
    assert.equal(who, null)
    cost[user] = us
  }
  const most = Math.max(...Object.values(cost))
  // a single decoy of ann's kind answered bob in microseconds
  for (const [user, us] of Object.entries(cost)) assert.ok(us > most / 2, `costs in µs of CPU: ${JSON.stringify(cost)} (${user})`)
  // each password is its own user's only
  assert.equal(await auth.check(basic('ann', 'anns')), 'ann')
  assert.equal(await auth.check(basic('bob', 'bobs')), 'bob')
  assert.equal(await auth.check(basic('ann', 'bobs')), null)
  assert.equal(await auth.check(basic('bob', 'anns')), null)
})

test('admin listener: past 64 waiting bcrypt checks, 503 with Retry-After and the reason; a remembered login still passes', async (t) => {
  const backend = await startBackend('web')
  const a = await startAdminLb(simpleConfig([backend.address]), { admin: `users = ["ann:${bcrypt.hashSync('right', 10)}"]` })
  t.after(async () => { await a.lb.stop(); await backend.close() })
  const url = `${a.admin}/v2/services/lb/configuration/version`
  const ok = { headers: { authorization: basic('ann', 'right') } }
  assert.equal((await request(url, ok)).status, 200) // remembered from now on
  // distinct passwords, so that none is remembered; 64 wait at most
  const rs = await Promise.all(Array.from({ length: 100 }, (_, i) => request(url, { headers: { authorization: basic('ann', `guess-${i}`) } })))
  const busy = rs.filter((r) => r.status === 503)
  const seen = rs.map((r) => r.status).sort().join(' ')
  assert.equal(busy.length + rs.filter((r) => r.status === 401).length, 100, seen)
  assert.ok(busy.length > 0, seen)
  assert.equal(busy[0]!.headers['retry-after'], '1')
  assert.match(JSON.parse(busy[0]!.body).message, /too many password checks in progress \(64 waiting\)/)
  assert.equal((await request(url, ok)).status, 200)
})
