// kill -9 while config API writes are in flight, then restart: every write that
// was acknowledged (201) is still there, the state file is whole, and the
// version never goes back.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { simpleConfig, sleep } from '../helpers.js'
import { type AdminLb, backends, restartLb, send, startAdminLb } from './util.js'

const CFG = '/v2/services/lb/configuration'

test('config API: kill -9 during writes loses nothing acknowledged', async (t) => {
  const [b1] = await backends(1)
  let a: AdminLb = await startAdminLb(simpleConfig([b1!.address]))
  t.after(async () => { await a.lb.stop('SIGKILL'); await b1!.close() })
  const acked = new Set<string>()
  let lastVersion = 1
  for (let round = 0; round < 3; round++) {
    let stop = false
    const writer = async (w: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const name = `r${round}w${w}n${i}`
        try {
          const r = await send('POST', `${a.admin}${CFG}/backends`, { name, balance: { algorithm: 'leastconn' } })
          if (r.status === 201) {
            acked.add(name)
            lastVersion = Math.max(lastVersion, Number(r.headers['configuration-version']))
          }
        } catch {
          return // the process is gone
        }
      }
    }
    const writers = [0, 1, 2, 3].map(writer)
    await sleep(250 + round * 150) // the thing tested: SIGKILL at a different moment of the writes each round
    a.lb.proc.kill('SIGKILL')
    await a.lb.stop('SIGKILL')
    stop = true
    await Promise.all(writers)
    const state = JSON.parse(readFileSync(join(a.lb.dir, 'run', 'config-api.json'), 'utf8')) as { version: number, backends: Record<string, unknown> }
    assert.ok(state.version >= lastVersion, `state version ${state.version} < acknowledged ${lastVersion}`)
    for (const name of acked) assert.ok(name in state.backends, `acknowledged ${name} missing from the state file`)
    a = await restartLb(a)
    const r = await send('GET', `${a.admin}${CFG}/backends`)
    const names = new Set((r.json as { data: Array<{ name: string }> }).data.map((b) => b.name))
    for (const name of acked) assert.ok(names.has(name), `acknowledged ${name} missing after restart`)
    assert.ok(Number(r.headers['configuration-version']) >= lastVersion)
  }
  // a few are enough to show the test wrote while it killed; a slow disk (two fsyncs a write) allows few
  assert.ok(acked.size > 3, `only ${acked.size} writes were acknowledged`)
})
