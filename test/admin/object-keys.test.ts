// Names are keys of plain objects in the config model (services, backends,
// options): a client's "__proto__" or "constructor" must be an ordinary name
// or a clear refusal, never Object.prototype's member nor a changed prototype.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { simpleConfig } from '../helpers.js'
import { backends, send, startAdminLb } from './util.js'

const CFG = '/v2/services/lb/configuration'

test('config API: backends named after Object.prototype members are refused by name, and nothing changes', async (t) => {
  const [b1] = await backends(1)
  const a = await startAdminLb(simpleConfig([b1!.address]))
  t.after(async () => { await a.lb.stop(); await b1!.close() })
  for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
    let r = await send('POST', `${a.admin}${CFG}/backends`, { name, balance: { algorithm: 'roundrobin' } })
    assert.equal(r.status, 422, `${name}: ${r.body}`)
    assert.equal((r.json as { message: string }).message, `name "${name}" is reserved (a member of every JavaScript object); choose another`)
    r = await send('GET', `${a.admin}${CFG}/backends/${name}`)
    assert.equal(r.status, 404, `${name}: ${r.body}`)
    r = await send('GET', `${a.admin}${CFG}/servers?backend=${name}`)
    assert.equal(r.status, 404, `${name}: ${r.body}`)
    r = await send('DELETE', `${a.admin}${CFG}/backends/${name}`)
    assert.equal(r.status, 404, `${name}: ${r.body}`)
  }
  const r = await send('GET', `${a.admin}${CFG}/version`)
  assert.equal(r.body.trim(), '1', 'no write happened')
  assert.equal((await send('GET', `${a.lb.url}/`)).status, 200)
})
