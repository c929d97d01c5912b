// Fuzz campaign, surface 3: the config API (HAProxy Data Plane API paths) and
// the dashboard API on their loopback listeners (transactions included): mutated JSON bodies, broken
// JSON, deep nesting, malformed percent-escapes, over-long and raw-byte
// paths, odd query strings. Each case gets a status under 500 within the
// time-out, and lb stays up; afterwards the data plane still answers.
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import { test } from 'node:test'
import { request, sleep } from '../helpers.js'
import { backends, restartLb, startAdminLb } from '../admin/util.js'
import { simpleConfig } from '../helpers.js'
import { LbWatch, type Verdict, caseCount, printable, report, runCases } from './lib/campaign.js'
import { bodyText, jsonValue, mutate } from './lib/json.js'
import type { Rng } from './lib/prng.js'
import { rawRequest, send } from './lib/raw-http.js'

const TIMEOUT = 3000
const CFG = '/v2/services/lb/configuration'
const SEGMENTS = ['web', 's1', 'nope', '%E9', '%', '%zz', '%C0%AF', '%2F', '..', '%00', 'é', '\xe9', 'x'.repeat(5000), '%25', 'a b', '']

interface ApiCase { family: string, listener: 'admin' | 'dash', bytes: Buffer }

function segment (rng: Rng): string { return rng.chance(0.5) ? rng.pick(SEGMENTS) : `b${rng.int(50)}` }

function query (rng: Rng): string {
  return rng.pick(['', '', `?backend=${segment(rng)}`, '?backend=web', `?version=${rng.pick(['1', '-1', 'x', '1e3', '99999999999999999999', '%E9'])}`, '?backend=web&version=1', '?%E9=1', '?backend',
    `?transaction_id=${segment(rng)}`, `?backend=web&transaction_id=${segment(rng)}&version=1`])
}

function apiCase (rng: Rng): ApiCase {
  const kind = rng.int(10)
  if (kind < 2) { // the dashboard API: GETs with hostile ids and query strings
    const path = rng.pick(['/api/http/routers', '/api/http/services', '/api/http/middlewares', '/api/entrypoints', '/api/overview', '/api/rawdata', '/metrics', '/dashboard/'])
    const id = rng.chance(0.6) ? `/${segment(rng)}` : ''
    const q = rng.pick(['', '?page=0', '?per_page=-1', '?page=x&per_page=1e9', '?search=%E9', '?sortBy=__proto__', '?direction=%'])
    return { family: 'dashboard-path', listener: 'dash', bytes: rawRequest('GET', path + id + q, null) }
  }
  const method = rng.pick(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'])
  if (kind < 4) { // paths: malformed escapes, long, raw bytes
    const path = `${CFG}/${rng.pick(['backends', 'servers', 'version', 'nope'])}/${segment(rng)}${query(rng)}`
    return { family: 'config-path', listener: 'admin', bytes: rawRequest(method, rng.chance(0.1) ? `/v2/${rng.bytes(20).toString('latin1').replace(/[\r\n ]/g, 'x')}` : path, null) }
  }
  if (kind === 4) { // transactions: start, read, commit, delete with hostile ids and versions
    const path = `/v2/services/lb/transactions${rng.chance(0.6) ? `/${segment(rng)}` : ''}${rng.pick(['', '?version=1', `?version=${rng.pick(['0', 'x', '%E9', '99999999999999999999'])}`, '?status=failed', '?status=%', '?force_reload=maybe'])}`
    return { family: 'transaction-path', listener: 'admin', bytes: rawRequest(method, path, rng.chance(0.3) ? bodyText(rng, jsonValue(rng)) : null) }
  }
  const backend = { name: `b${rng.int(50)}`, balance: { algorithm: rng.pick(['roundrobin', 'leastconn', 'source']) } }
  const server = { name: `s${rng.int(20)}`, address: '127.0.0.1', port: 1 + rng.int(65535), weight: 1 + rng.int(10), check: rng.pick(['enabled', 'disabled']), maintenance: 'disabled' }
  const which = rng.int(3)
  const value = which === 0 ? mutate(rng, backend) : which === 1 ? mutate(rng, server) : rng.chance(0.5) ? mutate(rng, { admin_state: 'ready' }) : jsonValue(rng)
  const name = (value as { name?: unknown } | null)?.name
  // a mutated name may be any JSON value, or an object String() cannot convert
  const nameSegment = typeof name === 'string' ? name : name === undefined ? backend.name : JSON.stringify(name)
  const target = which === 0
    ? `${CFG}/backends${rng.chance(0.5) ? `/${nameSegment}` : ''}${query(rng)}`
    : which === 1
      ? `${CFG}/servers${rng.chance(0.5) ? `/${server.name}` : ''}?backend=${rng.chance(0.8) ? 'web' : segment(rng)}`
      : `/v2/services/lb/runtime/servers/${segment(rng)}?backend=web`
  return { family: which === 0 ? 'backend-body' : which === 1 ? 'server-body' : 'runtime-body', listener: 'admin', bytes: rawRequest(rng.pick(['POST', 'PUT', 'PUT', method]), encodeURI(target.replace(/\p{Cs}/gu, '\uFFFD')).replace(/%25/g, '%'), bodyText(rng, value)) }
}

test('config and dashboard APIs: every request gets a status under 500, and lb stays up', async (t) => {
  const [b1] = await backends(1)
  let a = await startAdminLb(simpleConfig([b1!.address]))
  t.after(async () => { await a.lb.stop(); await b1!.close(); rmSync(a.lb.dir, { recursive: true, force: true }) })
  const watch = new LbWatch(a.lb)

  const exec = async (c: ApiCase): Promise<Verdict | null> => {
    const r = await send(c.listener === 'admin' ? a.adminPort : a.dashPort, c.bytes, TIMEOUT)
    const got = r.statuses.length > 0 ? `status ${r.statuses[0]} (${JSON.stringify(r.head.slice(r.head.indexOf('\r\n\r\n') + 4, r.head.indexOf('\r\n\r\n') + 150))})` : r.closed ? 'closed without a status line' : `nothing within ${TIMEOUT} ms`
    if (r.statuses.length === 0) {
      // a process that is aborting closes its sockets first: let it finish, so that the crash is pinned on this case
      for (let i = 0; i < 50 && a.lb.proc.exitCode === null && a.lb.proc.signalCode === null; i++) await sleep(20)
      return { check: 'unanswered', expected: `a status line within ${TIMEOUT} ms`, got }
    }
    if (r.statuses[0]! >= 500) return { check: '5xx', expected: 'a status under 500 (bad input is the client\'s error)', got }
    return null
  }
  report(t, await runCases({
    surface: 'config-api',
    count: caseCount(400),
    concurrency: 1, // one at a time: a case that kills the process is named alone
    generate: apiCase,
    family: (c) => c.family,
    input: (c) => `${c.listener}: ${printable(c.bytes, 400)}`,
    exec,
    watch: () => watch.check(),
    restart: async () => {
      a = await restartLb(a)
      watch.follow(a.lb)
    },
  }))
  // the run's writes (committed transactions included) may have pointed web at closed ports: a 502 is an answer too
  const after = await request(`${a.lb.url}/after`)
  assert.ok(after.status === 200 || (after.status === 502 && /upstream/.test(after.body)), `the data plane answers after the run: ${after.status} ${after.body}`)
})
