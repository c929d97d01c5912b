// Rate-limit entries as HAProxy stick tables, with a real lb and real clients
// from several loopback addresses: `show table` lists each limit and its top
// sources with their counts, shows one source, filters on the counts, and
// `clear table <t> key <k>` unblocks one client; the config API answers the
// same in the Data Plane API's stick_table(s|_entries) shapes, and DELETE
// forgets a source. Runtime socket over node:net and, as operators do, socat.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type AdminLb, json, requireTool, send, sock, socat, startAdminLb } from './util.js'
import { type Backend, request, startBackend } from '../helpers.js'

const CONFIG = (backend: string): string => `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"

[routers.w]
rule = "PathPrefix(\`/w\`)"
service = "web"
middlewares = ["per-source"]

[routers.t]
rule = "PathPrefix(\`/t\`)"
service = "web"
middlewares = ["tokens"]

[middlewares.per-source]
type = "rateLimit"
algorithm = "slidingWindow"
limit = 20
period = "60s"

[middlewares.tokens]
type = "rateLimit"
algorithm = "tokenBucket"
average = 1
period = "60s"
burst = 10

[services.web]
[[services.web.servers]]
name = "s1"
address = "${backend}"
check = false
`

/** `n` requests to `path` from `from`, one after the other: their statuses. */
async function from (a: AdminLb, path: string, address: string, n: number): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await request(`${a.lb.url}${path}`, { localAddress: address })).status)
  return out
}

/** The entry lines of a `show table` reply, as [key, rest after exp]. */
function rows (out: string): Array<[string, string]> {
  return [...out.matchAll(/^0x[0-9a-f]+: key=(\S+) use=0 exp=\d+ (.*)$/gm)].map((m) => [m[1]!, m[2]!])
}

describe('stick tables: rate-limit entries on the runtime socket and the config API', () => {
  let a: AdminLb
  let backend: Backend
  before(async () => {
    backend = await startBackend('web')
    a = await startAdminLb(CONFIG(backend.address))
    // three sources on the sliding window: 30 (10 of them refused), 12 and 5; two on the bucket
    assert.deepEqual((await from(a, '/w', '127.0.0.21', 30)).filter((s) => s === 429).length, 10)
    await from(a, '/w', '127.0.0.22', 12)
    await from(a, '/w', '127.0.0.23', 5)
    await from(a, '/t', '127.0.0.21', 4)
    await from(a, '/t', '127.0.0.24', 12)
  })
  after(async () => {
    await a?.lb.stop()
    await backend?.close()
  })

  test('show table: one header per rate limit, HAProxy\'s form', async () => {
    const out = await sock(a.sock, 'show table')
    assert.match(out, /^# table: per-source, type: ip, size:102400, used:3\n# table: tokens, type: ip, size:102400, used:2\n\n$/)
  })

  test('show table <limit>: the sources with their counts, highest first; HAProxy\'s entry lines', async () => {
    const out = await sock(a.sock, 'show table per-source')
    assert.match(out, /^# table: per-source, type: ip, size:102400, used:3\n/)
    // refused requests count too (HAProxy's track-sc0), so the top source is at 30
    assert.deepEqual(rows(out), [
      ['127.0.0.21', 'http_req_rate(60000)=30'],
      ['127.0.0.22', 'http_req_rate(60000)=12'],
      ['127.0.0.23', 'http_req_rate(60000)=5'],
    ])
    // the expiry counts down from the entry's time to live (twice the period, at least 30 s)
    const exp = Number(/exp=(\d+)/.exec(out)![1])
    assert.ok(exp > 60_000 && exp <= 120_000, `exp=${exp}`)
    // the buckets show their level: 4 tokens spent of 10 (and a little refilled, 1 per minute), 10 of 10
    assert.deepEqual(rows(await sock(a.sock, 'show table tokens')), [['127.0.0.24', 'bucket_level=10'], ['127.0.0.21', 'bucket_level=4']])
  })

  test('show table <limit> key <address> and data filters', async () => {
    assert.deepEqual(rows(await sock(a.sock, 'show table per-source key 127.0.0.22')), [['127.0.0.22', 'http_req_rate(60000)=12']])
    // a source the limit never saw: nothing, as HAProxy
    assert.equal(await sock(a.sock, 'show table per-source key 127.0.0.99'), '\n')
    assert.deepEqual(rows(await sock(a.sock, 'show table per-source data.http_req_rate gt 10')).map((r) => r[0]), ['127.0.0.21', '127.0.0.22'])
    assert.deepEqual(rows(await sock(a.sock, 'show table per-source data.http_req_rate ge 12 data.http_req_rate lt 30')).map((r) => r[0]), ['127.0.0.22'])
  })

  test('bad table commands get HAProxy\'s messages', async () => {
    const cases: Array<[string, string]> = [
      ['show table nope', 'No such table'],
      ['show table per-source key', 'Key value expected'],
      ['show table per-source key not-an-address', 'Invalid key'],
      ['show table per-source data.gpc0 gt 1', 'Data type not stored in this table'],
      ['show table per-source data.bucket_level gt 1', 'Data type not stored in this table'],
      ['show table per-source data.nonsense gt 1', 'Unknown data type'],
      ['show table per-source data.http_req_rate over 1', 'Require and operator among "eq", "ne", "le", "ge", "lt", "gt"'],
      ['show table per-source data.http_req_rate gt x', 'Require a valid integer value to compare against'],
      ['show table per-source sideways', 'Optional argument only supports "data.<store_data_type>" <operator> <value> and key <key>'],
      ['clear table', 'Required arguments: <table> "data.<store_data_type>" <operator> <value> or <table> key <key>'],
      ['clear table nope key 127.0.0.1', 'No such table'],
    ]
    for (const [cmd, msg] of cases) assert.equal(await sock(a.sock, cmd), `${msg}\n\n`, cmd)
    const help = await sock(a.sock, 'help')
    assert.match(help, /^ {2}show table \[<table> \[<filter>\]\*\] +: report table usage stats/m)
    assert.match(help, /^ {2}clear table <table> \[<filter>\]\* +: remove an entry/m)
  })

  test('clear table <limit> key <address> (echo | socat) unblocks that client only', async (t) => {
    if (requireTool(t, 'socat', 'socat') === null) return
    assert.deepEqual(await from(a, '/w', '127.0.0.21', 1), [429])
    assert.equal(await socat(a.sock, 'clear table per-source key 127.0.0.21\n'), '\n')
    assert.deepEqual(await from(a, '/w', '127.0.0.21', 1), [200])
    assert.deepEqual(rows(await socat(a.sock, 'show table per-source key 127.0.0.21\n')), [['127.0.0.21', 'http_req_rate(60000)=1']])
    // the other sources and the other limit keep their counts
    assert.deepEqual(rows(await sock(a.sock, 'show table per-source key 127.0.0.22')), [['127.0.0.22', 'http_req_rate(60000)=12']])
    assert.deepEqual(rows(await sock(a.sock, 'show table tokens key 127.0.0.21')), [['127.0.0.21', 'bucket_level=4']])
    await a.lb.logMatching(/"msg":"runtime socket command","command":"clear table per-source key 127\.0\.0\.21"/)
  })

  test('config API: stick_tables and stick_table_entries (Data Plane API v2 shapes); DELETE forgets a source', async () => {
    const tables = await json(`${a.admin}/v2/services/lb/runtime/stick_tables`)
    assert.equal(tables.status, 200)
    assert.deepEqual(tables.json, [
      { name: 'per-source', type: 'ip', size: 102400, used: 3, fields: [{ field: 'http_req_rate', type: 'rate', period: 60000 }] },
      { name: 'tokens', type: 'ip', size: 102400, used: 2, fields: [{ field: 'bucket_level', type: 'counter' }] },
    ])
    assert.deepEqual((await json(`${a.admin}/v2/services/haproxy/runtime/stick_tables/tokens`)).json, (tables.json as unknown[])[1])
    const base = `${a.admin}/v2/services/lb/runtime/stick_table_entries?stick_table=per-source`
    const list = await json(base) as { status: number, json: Array<Record<string, unknown>> }
    assert.equal(list.status, 200)
    assert.deepEqual(list.json.map((e) => [e.key, e.http_req_rate, e.use]), [['127.0.0.22', 12, false], ['127.0.0.23', 5, false], ['127.0.0.21', 1, false]])
    assert.match(String(list.json[0]!.id), /^0x[0-9a-f]+$/)
    assert.ok(typeof list.json[0]!.exp === 'number' && list.json[0]!.exp > 0)
    assert.deepEqual((await json(`${base}&count=1&offset=1`) as { json: Array<{ key: string }> }).json.map((e) => e.key), ['127.0.0.23'])
    assert.deepEqual((await json(`${base}&filter=${encodeURIComponent('data.http_req_rate ge 5')}`) as { json: Array<{ key: string }> }).json.map((e) => e.key), ['127.0.0.22', '127.0.0.23'])
    assert.deepEqual((await json(`${base}&key=127.0.0.23`) as { json: Array<{ key: string, http_req_rate: number }> }).json.map((e) => [e.key, e.http_req_rate]), [['127.0.0.23', 5]])

    // .22 is over the limit after 9 more; DELETE unblocks it
    await from(a, '/w', '127.0.0.22', 9)
    assert.deepEqual(await from(a, '/w', '127.0.0.22', 1), [429])
    const del = await send('DELETE', `${base}&key=127.0.0.22`)
    assert.equal(del.status, 204, del.body)
    assert.deepEqual((await json(`${base}&key=127.0.0.22`)).json, [])
    assert.deepEqual(await from(a, '/w', '127.0.0.22', 1), [200])
    await a.lb.logMatching(/"msg":"config API: stick table entry cleared","table":"per-source","key":"127\.0\.0\.22"/)

    // errors in the API's {code, message}
    const cases: Array<[string, string, number, RegExp]> = [
      ['GET', `${a.admin}/v2/services/lb/runtime/stick_tables/nope`, 404, /stick table nope does not exist/],
      ['GET', `${a.admin}/v2/services/lb/runtime/stick_table_entries`, 422, /stick_table in query is required/],
      ['GET', `${a.admin}/v2/services/lb/runtime/stick_table_entries?stick_table=nope`, 404, /stick table nope does not exist/],
      ['GET', `${base}&key=nope`, 400, /key "nope" is not an IP address/],
      ['GET', `${base}&filter=data.gpc0%20gt%201`, 400, /Data type not stored in this table/],
      ['GET', `${base}&count=x`, 422, /count in query must be of type integer/],
      ['DELETE', base, 422, /key in query is required/],
      ['DELETE', `${base}&key=127.0.0.1&version=3`, 400, /unknown query parameter "version"/],
    ]
    for (const [method, url, status, re] of cases) {
      const r = await send(method, url)
      assert.equal(r.status, status, `${method} ${url}: ${r.body}`)
      assert.match((r.json as { message: string }).message, re, url)
      assert.equal((r.json as { code: number }).code > 0, true)
    }
  })

  test('clear table <limit> with a filter forgets the matching entries, without one the whole limit', async () => {
    assert.equal(await sock(a.sock, 'clear table tokens data.bucket_level ge 10'), '\n')
    assert.deepEqual(rows(await sock(a.sock, 'show table tokens')).map((r) => r[0]), ['127.0.0.21'])
    assert.equal(await sock(a.sock, 'clear table per-source'), '\n')
    assert.equal(await sock(a.sock, 'show table per-source'), '# table: per-source, type: ip, size:102400, used:0\n\n')
    assert.match(await sock(a.sock, 'show table'), /used:0\n# table: tokens, type: ip, size:102400, used:1\n/)
  })
})
