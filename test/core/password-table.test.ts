// core/auth/password-table.ts, the check basicAuth and the admin listeners
// share: with hashes of several kinds, every user name, known or not, costs
// one hash of each kind, so times do not tell names apart. (The bcrypt case,
// off the calling thread, is in test/admin/auth.test.ts.)
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { test } from 'node:test'
import bcrypt from 'bcryptjs'
import { type HtpasswdEntry, md5crypt, parseEntry } from '../../core/auth/htpasswd.js'
import { PasswordTable } from '../../core/auth/password-table.js'

const entry = (line: string): HtpasswdEntry => parseEntry(line) as HtpasswdEntry

test('apr1 beside {SHA}: both users and an unknown name cost an apr1 check, on the calling thread', () => {
  const table = new PasswordTable([
    entry(`ann:${md5crypt('anns', 'saltsalt', '$apr1$')}`),
    entry(`bob:{SHA}${createHash('sha1').update('bobs').digest('base64')}`),
  ])
  assert.equal(table.checkSync('ann', 'anns'), true)
  assert.equal(table.checkSync('bob', 'bobs'), true)
  assert.equal(table.checkSync('ann', 'bobs'), false)
  assert.equal(table.checkSync('bob', 'anns'), false)
  assert.equal(table.checkSync('dan', 'anns'), false)
  // CPU time of 300 wrong checks per name: an apr1 check is 1,000 MD5 rounds, a {SHA} one is one SHA-1
  const cost: Record<string, number> = {}
  for (const user of ['ann', 'bob', 'dan']) {
    const before = process.cpuUsage()
    for (let i = 0; i < 300; i++) table.checkSync(user, `wrong-${i}`)
    const d = process.cpuUsage(before)
    cost[user] = d.user + d.system
  }
  const most = Math.max(...Object.values(cost))
  for (const [user, us] of Object.entries(cost)) assert.ok(us > most / 2, `costs in µs of CPU: ${JSON.stringify(cost)} (${user})`)
})

test('a bcrypt user in the set: checkSync leaves every name to check(), which answers each password for its own user', async () => {
  // cost 4, the least bcrypt allows: this test is about answers, not cost
  const table = new PasswordTable([
    entry(`ann:${bcrypt.hashSync('anns', 4)}`),
    entry(`bob:{SHA}${createHash('sha1').update('bobs').digest('base64')}`),
  ])
  assert.equal(table.checkSync('bob', 'bobs'), null)
  assert.equal(await table.check('bob', 'bobs'), true)
  assert.equal(await table.check('ann', 'anns'), true)
  assert.equal(await table.check('ann', 'bobs'), false)
  assert.equal(await table.check('dan', 'bobs'), false)
})
