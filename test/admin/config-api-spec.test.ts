// The config API never silently ignores what it does not implement: an
// unknown transaction_id is answered as the Data Plane API answers one, an
// unknown query parameter on a write is a 400, the out-of-range port error
// names only the port. /v2/info and /v2/specification are served, the
// document is valid OpenAPI (openapi-backend's validator, strict) and every
// real answer below matches it, the transactions' routes and staged (202)
// writes included; /v2/services/haproxy/... answers as /v2/services/lb/... does.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { OpenAPIBackend } from 'openapi-backend'
import { simpleConfig } from '../helpers.js'
import { backends, send, startAdminLb } from './util.js'

const LB = '/v2/services/lb/configuration'
const HAP = '/v2/services/haproxy/configuration'

test('config API: unknown transactions and parameters, port error, info, specification, haproxy alias', async (t) => {
  const [b1] = await backends(1)
  const a = await startAdminLb(simpleConfig([b1!.address]))
  t.after(async () => { await a.lb.stop(); await b1!.close() })

  const spec = await send('GET', `${a.admin}/v2/specification`)
  assert.equal(spec.status, 200)
  const api = new OpenAPIBackend({ definition: spec.json as never, strict: true, validate: true, quick: false })
  await api.init() // throws when the document is not valid OpenAPI
  let checked = 0
  /** one real call, its answer checked against the document: a documented status and a body of its schema */
  const call = async (method: string, path: string, body?: unknown): Promise<Awaited<ReturnType<typeof send>>> => {
    const r = await send(method, `${a.admin}${path}`, body)
    const url = new URL(path, 'http://x')
    const op = api.matchOperation({ method, path: url.pathname, query: Object.fromEntries(url.searchParams), headers: {} })
    if (op === undefined) assert.fail(`${method} ${url.pathname} is not in the specification`)
    const responses = (op as unknown as { responses?: Record<string, { content?: unknown }> }).responses ?? {}
    const documented = responses[String(r.status)]
    assert.ok(documented !== undefined, `${method} ${path}: status ${r.status} is documented (${r.body})`)
    if (documented.content !== undefined) {
      const v = api.validateResponse(r.json, op, r.status)
      assert.equal(v.errors, null, `${method} ${path} ${r.status}: ${r.body}: ${JSON.stringify(v.errors)}`)
    }
    checked++
    return r
  }
  const version = async (): Promise<string> => (await call('GET', `${LB}/version`)).body.trim()

  // an unknown transaction: 400 as client-native's "transaction does not exist"; nothing is applied
  let r = await call('POST', `${LB}/backends?transaction_id=abc`, { name: 'staged' })
  assert.equal(r.status, 400)
  assert.deepEqual(r.json, { code: 400, message: 'transaction does not exist: transaction abc does not exist' })
  assert.equal(await version(), '1', 'no version bump')
  assert.equal((await call('GET', `${LB}/backends/staged`)).status, 404, 'not created')
  r = await call('GET', `${LB}/backends?transaction_id=abc`)
  assert.equal(r.status, 400, 'reads in an unknown transaction too')
  r = await call('POST', `${LB}/backends?transaction_id=abc&version=1`, { name: 'staged' })
  assert.deepEqual(r.json, { code: 400, message: 'both version and transaction specified, specify only one' })
  r = await call('DELETE', `${LB}/servers/s1?backend=web&transaction_id=t1`)
  assert.equal(r.status, 400)
  assert.equal((await call('GET', `${LB}/servers/s1?backend=web`)).status, 200, 'not deleted')

  // an unknown query parameter on a write: 400 naming it
  for (const [method, path, body] of [
    ['POST', `${LB}/backends?dry_run=1`, { name: 'x' }],
    ['PUT', `${LB}/backends/web?versoin=1`, { name: 'web' }],
    ['DELETE', `${LB}/backends/web?cascade=true`, undefined],
    ['POST', `${LB}/servers?backend=web&foo=bar`, { name: 's9', address: '127.0.0.1', port: 1 }],
    ['PUT', '/v2/services/lb/runtime/servers/s1?backend=web&force=1', { admin_state: 'drain' }],
  ] as const) {
    r = await call(method, path, body)
    assert.equal(r.status, 400, `${method} ${path}: ${r.body}`)
    const bad = new URL(path, 'http://x').searchParams
    const name = [...bad.keys()].find((k) => !['backend', 'version'].includes(k))!
    assert.match((r.json as { message: string }).message, new RegExp(`^unknown query parameter "${name}"`))
  }
  r = await call('POST', `${LB}/backends?force_reload=maybe`, { name: 'x' })
  assert.equal(r.status, 422)
  assert.equal(await version(), '1', 'nothing was applied')
  // known parameters still work; force_reload is accepted
  r = await call('POST', `${LB}/backends?version=1&force_reload=true`, { name: 'api' })
  assert.equal(r.status, 201, r.body)

  // the out-of-range port names only the port
  r = await call('POST', `${LB}/servers?backend=web`, { name: 's9', address: '127.0.0.1', port: 70000 })
  assert.equal(r.status, 422)
  assert.deepEqual(r.json, { code: 608, message: 'port in body should be less than or equal to 65535' })
  r = await call('POST', `${LB}/servers?backend=web`, { name: 's9', address: '127.0.0.1', port: 0 })
  assert.deepEqual(r.json, { code: 609, message: 'port in body should be greater than or equal to 1' })

  // /v2/services/haproxy/... is the same API
  const lbList = await call('GET', `${LB}/backends`)
  const hapList = await call('GET', `${HAP}/backends`)
  assert.equal(hapList.status, 200)
  assert.deepEqual(hapList.json, lbList.json)
  r = await call('POST', `${HAP}/servers?backend=api`, { name: 'x1', address: '127.0.0.1', port: b1!.port })
  assert.equal(r.status, 201, r.body)
  assert.equal((await call('GET', `${LB}/servers/x1?backend=api`)).status, 200, 'written through the alias, read through lb')
  assert.equal((await call('GET', '/v2/services/haproxy/runtime/servers?backend=api')).status, 200)
  assert.equal((await call('PUT', '/v2/services/haproxy/runtime/servers/x1?backend=api', { admin_state: 'drain' })).status, 200)
  assert.equal((await call('DELETE', `${HAP}/backends/api`)).status, 204)

  // /v2/info
  r = await call('GET', '/v2/info')
  const info = r.json as { api: { version: string }, system: { uptime: number, cpu_info: { num_cpus: number } } }
  assert.equal(info.api.version, '0.1.0')
  assert.ok(info.system.cpu_info.num_cpus >= 1)
  assert.ok(info.system.uptime >= 0)

  // the rest of the documented routes, each answer against the document
  await call('GET', `${LB}/backends/web`)
  await call('PUT', `${LB}/backends/web`, { name: 'web', balance: { algorithm: 'leastconn' } })
  await call('GET', `${LB}/servers?backend=web`)
  await call('PUT', `${LB}/servers/s1?backend=web`, { name: 's1', address: '127.0.0.1', port: b1!.port, weight: 2 })
  await call('GET', '/v2/services/lb/runtime/servers/s1?backend=web')
  await call('POST', `${LB}/backends`, { name: 'x', colour: 'blue' })
  await call('GET', `${LB}/backends/nope`)

  // transactions: every route and every staged write, each answer against the document
  const TX = '/v2/services/lb/transactions'
  const v = Number(await version())
  r = await call('POST', `${TX}?version=${v}`)
  assert.equal(r.status, 201, r.body)
  const id = (r.json as { id: string }).id
  const staged = [
    await call('POST', `${LB}/backends?transaction_id=${id}`, { name: 'tx' }),
    await call('PUT', `${LB}/backends/tx?transaction_id=${id}`, { name: 'tx', balance: { algorithm: 'source' } }),
    await call('POST', `${LB}/servers?backend=tx&transaction_id=${id}`, { name: 't1', address: '127.0.0.1', port: b1!.port }),
    await call('PUT', `${LB}/servers/t1?backend=tx&transaction_id=${id}`, { name: 't1', address: '127.0.0.1', port: b1!.port, weight: 3 }),
    await call('DELETE', `${LB}/servers/s1?backend=x&transaction_id=${id}`),
    await call('DELETE', `${LB}/backends/nope?transaction_id=${id}`),
  ]
  assert.deepEqual(staged.map((x) => x.status), [202, 202, 202, 202, 404, 404], staged.map((x) => x.body).join('\n'))
  for (const path of [`${LB}/version`, `${LB}/backends`, `${LB}/backends/tx`, `${LB}/servers?backend=tx`, `${LB}/servers/t1?backend=tx`]) {
    r = await call('GET', `${path}${path.includes('?') ? '&' : '?'}transaction_id=${id}`)
    assert.equal(r.status, 200, `${path}: ${r.body}`)
  }
  assert.equal((await call('GET', TX)).status, 200)
  assert.equal((await call('GET', `${TX}?status=in_progress`)).status, 200)
  assert.equal((await call('GET', `${TX}/${id}`)).status, 200)
  const other = (await call('POST', `${TX}?version=${v}`)).json as { id: string }
  assert.equal((await call('DELETE', `${LB}/backends/web?transaction_id=${other.id}`)).status, 202)
  r = await call('PUT', `${TX}/${id}`)
  assert.deepEqual([r.status, (r.json as { status: string }).status], [200, 'success'])
  assert.equal((await call('PUT', `${TX}/${other.id}`)).status, 406)
  const broken = (await call('POST', `${TX}?version=${v + 1}`)).json as { id: string }
  assert.equal((await call('DELETE', `${LB}/backends/web?transaction_id=${broken.id}`)).status, 202)
  assert.equal((await call('GET', `${LB}/backends?transaction_id=${broken.id}`)).status, 400)
  assert.equal((await call('PUT', `${TX}/${broken.id}`)).status, 400)
  assert.equal((await call('DELETE', `${TX}/${broken.id}`)).status, 204)
  assert.equal((await call('GET', `${TX}/${broken.id}`)).status, 404)
  assert.equal((await call('PUT', `${TX}/${broken.id}`)).status, 404)
  assert.equal((await call('DELETE', `${TX}/${broken.id}`)).status, 404)
  assert.equal((await call('POST', TX)).status, 422)
  assert.equal((await call('POST', `${TX}?version=1`)).status, 409)
  assert.equal((await call('GET', `${TX}?status=done`)).status, 422)
  assert.equal((await call('GET', `/v2/services/haproxy/transactions/${other.id}`)).status, 200)
  assert.ok(checked >= 60, `${checked} answers checked against the specification`)
})
