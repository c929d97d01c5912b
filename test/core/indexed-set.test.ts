// IndexedSet (core/indexed-set.ts): the set of exchanges in flight (proxy.ts) and of busy upstream
// connections (pool.ts). Its members are what the drain deadline cuts and the pool's sweep times out;
// what it must not do is keep a member that left alive through the young generation's collections.
import { strict as assert } from 'node:assert'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { type Indexed, IndexedSet } from '../../core/indexed-set.js'
import { ROOT } from '../helpers.js'

const member = (name: string): Indexed & { name: string } => ({ name, setIndex: -1 })

test('add, delete and the members left: the last member takes a deleted one\'s place', () => {
  const set = new IndexedSet<Indexed & { name: string }>()
  const [a, b, c] = [member('a'), member('b'), member('c')]
  for (const x of [a, b, c]) set.add(x)
  assert.equal(set.size, 3)
  assert.equal(set.delete(a), true)
  assert.deepEqual(set.items.map((x) => x.name), ['c', 'b'])
  assert.deepEqual([a.setIndex, b.setIndex, c.setIndex], [-1, 1, 0])
  assert.equal(set.delete(a), false, 'a member that left is in no set')
  assert.equal(set.delete(b), true)
  assert.equal(set.delete(c), true)
  assert.equal(set.size, 0)
  set.add(a)
  assert.deepEqual(set.items, [a])
})

test('every member can leave while the members are walked from the last (cutExchanges, the pool\'s sweep)', () => {
  const set = new IndexedSet<Indexed & { name: string }>()
  for (let i = 0; i < 10; i++) set.add(member(String(i)))
  for (const x of [...set.items]) set.delete(x)
  assert.equal(set.size, 0)
  for (let i = 0; i < 10; i++) set.add(member(String(i)))
  const items = set.items
  for (let i = items.length - 1; i >= 0; i--) if (Number(items[i]!.name) % 2 === 0) set.delete(items[i]!)
  assert.deepEqual(set.items.map((x) => x.name).sort(), ['1', '3', '5', '7', '9'])
})

// 200,000 members of ~2 KB pass through the set, 32 at a time, as exchanges through the proxy; with
// V8's largest semi-space a JS Set in this place had 3.4 MB survive each scavenge in lb and its old
// generation grow by the exchanges it promoted (this script with a Set behind the same calls: 36.7 MB).
test('members that left are not kept alive: nothing promoted to the old generation by the churn', () => {
  const script = `
    import v8 from 'node:v8'
    const { IndexedSet } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'core', 'indexed-set.js')).href)})
    const oldUsed = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size
    const set = new IndexedSet()
    const inFlight = []
    const churn = (n) => {
      for (let i = 0; i < n; i++) {
        const x = { setIndex: -1, payload: new Array(250).fill(i / 3) }
        set.add(x)
        inFlight.push(x)
        if (inFlight.length > 32) set.delete(inFlight.shift())
      }
    }
    churn(2000)
    globalThis.gc()
    const before = oldUsed()
    churn(200000)
    process.stdout.write(String(oldUsed() - before))
  `
  const grown = Number(execFileSync(process.execPath,
    ['--expose-gc', '--min-semi-space-size=16', '--max-semi-space-size=16', '--input-type=module', '-e', script], { encoding: 'utf8' }))
  assert.ok(grown < 1_000_000, `the old generation grew by ${(grown / 1e6).toFixed(1)} MB`)
})
