// The runtime socket through a real unix socket: HAProxy's protocol (';'
// separated commands, an empty line after each reply, prompt mode), its
// messages, show info/stat/sess/servers state, and server commands changing
// live traffic on every worker, showing in the APIs and surviving a reload.
import assert from 'node:assert/strict'
import { readFileSync, rmSync, statSync } from 'node:fs'
import http from 'node:http'
import http2 from 'node:http2'
import https from 'node:https'
import net, { type AddressInfo } from 'node:net'
import { test } from 'node:test'
import { count, getMany, reloadApplied, request, simpleConfig, waitFor } from '../helpers.js'
import { COMMANDS } from '../../core/admin/runtime/commands.js'
import { makeCerts } from '../tls/certs.js'
import { backends, golden, json, normalize, requireTool, send, sock, socat, startAdminLb } from './util.js'

test('runtime socket: protocol, show commands and messages', async (t) => {
  const [b1, b2] = await backends(2)
  const a = await startAdminLb(simpleConfig([b1!.address, b2!.address]))
  t.after(async () => { await a.lb.stop(); await b1!.close(); await b2!.close() })
  assert.equal(statSync(a.sock).mode & 0o777, 0o600, 'socket mode 0600')

  const help = await sock(a.sock, 'help')
  golden('runtime-help.txt', help)
  assert.ok(help.endsWith(':  disconnect\n\n') || help.endsWith(': disconnect\n\n'))

  // several commands on one line, each reply ending with one empty line
  const multi = await sock(a.sock, 'show info;show servers state')
  const parts = multi.split('\n\n')
  assert.equal(parts.length, 3, multi)
  assert.equal(parts[2], '')
  assert.match(parts[0]!, /^Name: lb\nVersion: \S+\n/)
  assert.match(parts[0]!, /\nNbthread: 2\n/)
  assert.match(parts[0]!, /\nPid: \d+\nUptime: \dd \dh\d\dm\d\ds\nUptime_sec: \d+\n/)

  await getMany(a.lb.url, 4)
  const stat = await sock(a.sock, 'show stat')
  assert.ok(stat.endsWith('\n\n'))
  const lines = stat.trimEnd().split('\n')
  assert.ok(lines[0]!.startsWith('# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,'))
  assert.ok(lines[0]!.endsWith(',resbout,cache_hint_hits,-,'))
  const header = lines[0]!.slice(2).split(',')
  assert.equal(header.length, 119 + 2) // 119 columns, "-", and the empty field after the trailing comma
  const rows = lines.slice(1).map((l) => l.split(','))
  for (const r of rows) assert.equal(r.length, header.length, `row ${r.slice(0, 2).join(',')} has ${r.length} fields`)
  const col = (r: string[], name: string): string => r[header.indexOf(name)]!
  assert.deepEqual(rows.map((r) => `${col(r, 'pxname')}/${col(r, 'svname')}/${col(r, 'type')}/${col(r, 'status')}`),
    ['web/FRONTEND/0/OPEN', 'web/s1/2/no check', 'web/s2/2/no check', 'web/BACKEND/1/UP'])
  assert.equal(col(rows[1]!, 'lbtot'), '2')
  assert.equal(col(rows[3]!, 'hrsp_2xx'), '4')
  assert.equal(col(rows[0]!, 'req_tot'), '4')
  assert.equal(col(rows[1]!, 'addr'), b1!.address)
  const filtered = (await sock(a.sock, 'show stat web 4 -1')).trimEnd().split('\n')
  assert.equal(filtered.length, 3, 'type 4 = servers only')

  const state = await sock(a.sock, 'show servers state web')
  golden('runtime-servers-state.txt', normalize(state, { B1PORT: b1!.port, B2PORT: b2!.port }).replace(/^(\d+ web \d+ s\d \S+ \d \d \d \d )\d+/gm, '$1<secs>'))

  const errors = await sock(a.sock, 'foo bar;show foo;set server web/zz state drain;set server nope/s1 state drain;set server web state drain;' +
    'set server web/s1 state sleepy;set weight web/s1;set weight web/s1 300;get weight web/s1;show servers state nope')
  golden('runtime-errors.txt', errors)

  // show sess lists open client connections
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.after(() => agent.destroy())
  await new Promise<void>((resolve, reject) => http.get(a.lb.url, { agent }, (r) => { r.resume(); r.on('end', resolve) }).on('error', reject))
  const idle = /^0x[0-9a-f]+: proto=tcpv4 src=127\.0\.0\.1:\d+ fe=web be=<NONE> srv=<none>$/m
  await waitFor(async () => idle.test(await sock(a.sock, 'show sess')), 'show sess to list the idle keep-alive connection')

  // prompt mode: "> " after each reply, the connection stays open until quit
  const c = net.connect(a.sock)
  t.after(() => c.destroy())
  c.setEncoding('utf8')
  let out = ''
  c.on('data', (d: string) => { out += d })
  await new Promise((r) => c.on('connect', r))
  // each reply ends with the prompt "> "
  const replied = (n: number): Promise<unknown> => waitFor(() => out.split('> ').length > n, `reply ${n} on the runtime socket in prompt mode (so far ${JSON.stringify(out)})`)
  c.write('prompt\n')
  await replied(1)
  assert.equal(out, '\n> ')
  c.write('get weight web/s1\n')
  await replied(2)
  assert.equal(out, '\n> 1 (initial 1)\n\n> ')
  const closed = new Promise((r) => c.on('close', r))
  c.write('quit\n')
  await closed
})

test('runtime socket: drain, maint and weight change live traffic, show in the APIs, survive a reload', async (t) => {
  const [b1, b2] = await backends(2)
  const a = await startAdminLb(simpleConfig([b1!.address, b2!.address]))
  t.after(async () => { await a.lb.stop(); await b1!.close(); await b2!.close() })
  const status = async (): Promise<Record<string, string>> =>
    ((await json(`${a.dash}/api/http/services/web@file`)).json as { serverStatus: Record<string, string> }).serverStatus
  const adminState = async (): Promise<string[]> =>
    ((await send('GET', `${a.admin}/v2/services/lb/runtime/servers?backend=web`)).json as Array<{ admin_state: string }>).map((s) => s.admin_state)

  assert.deepEqual(count(await getMany(a.lb.url, 8)), { b1: 4, b2: 4 })
  assert.equal(await sock(a.sock, 'set server web/s1 state drain'), '\n')
  assert.deepEqual(count(await getMany(a.lb.url, 6)), { b2: 6 })
  assert.deepEqual(await adminState(), ['drain', 'ready'])
  assert.equal(await sock(a.sock, 'disable server web/s2;enable server web/s1'), '\n\n')
  assert.deepEqual(count(await getMany(a.lb.url, 6)), { b1: 6 })
  assert.deepEqual(await status(), { [`http://${b1!.address}`]: 'UP', [`http://${b2!.address}`]: 'DOWN' })
  assert.deepEqual(await adminState(), ['ready', 'maint'])
  const metrics = (await json(`${a.dash}/metrics`)).body
  assert.match(metrics, /lb_server_admin_state\{service="web@file",server="s2",state="maint"\} 1/)
  assert.match(metrics, new RegExp(`lb_service_server_up\\{service="web@file",server="s2",url="http://${b2!.address}"\\} 0`))

  assert.equal(await sock(a.sock, 'set server web/s2 state ready;set weight web/s1 3'), '\n\n')
  assert.deepEqual(count(await getMany(a.lb.url, 8)), { b1: 6, b2: 2 })
  assert.equal(await sock(a.sock, 'set server web/s2 weight 0'), '\n')
  assert.deepEqual(count(await getMany(a.lb.url, 4)), { b1: 4 })
  assert.equal(await sock(a.sock, 'set server web/s2 weight 100%;set server web/s1 state maint'), '\n\n')

  // a reload (SIGHUP, same file) keeps runtime changes
  await reloadApplied(a.lb)
  assert.deepEqual(count(await getMany(a.lb.url, 4)), { b2: 4 })
  assert.equal(await sock(a.sock, 'get weight web/s1'), '3 (initial 1)\n\n')
  assert.deepEqual(await adminState(), ['maint', 'ready'])
})

/** `show stat`'s FRONTEND rows, by entry point name. */
async function frontends (path: string): Promise<Map<string, Record<string, string>>> {
  const [head, ...rows] = (await sock(path, 'show stat')).trim().split('\n')
  const cols = head!.slice(2).split(',')
  const out = new Map<string, Record<string, string>>()
  for (const r of rows.map((l) => l.split(',')).filter((r) => r[1] === 'FRONTEND')) out.set(r[0]!, Object.fromEntries(cols.map((c, i) => [c, r[i]!])))
  return out
}

/** `show info` as name → value, and the names in order. */
async function info (path: string): Promise<{ v: Record<string, string>, keys: string[] }> {
  const lines = (await sock(path, 'show info')).trim().split('\n').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)] as const)
  return { v: Object.fromEntries(lines), keys: lines.map(([k]) => k) }
}

test('show stat: each FRONTEND counts its own connections and responses; show info: TotalBytesIn and the SSL fields', { timeout: 60_000 }, async (t) => {
  const certs = makeCerts()
  const [b1] = await backends(1)
  const tlsFiles = `cert = "${certs.server.cert}"\nkey = "${certs.server.key}"`
  // uWS http, node engine http, uWS https, https with http2 (worker 0's node:tls terminator, h2 sessions in worker 0)
  const a = await startAdminLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.alt]
address = "127.0.0.1:0"
engine = "node"
[entrypoints.tls]
address = "127.0.0.1:0"
protocol = "https"
[entrypoints.tls.tls]
${tlsFiles}
[entrypoints.h2s]
address = "127.0.0.1:0"
protocol = "https"
http2 = true
[entrypoints.h2s.tls]
${tlsFiles}
[routers.app]
rule = "PathPrefix(\`/app\`)"
service = "web"
[services.web]
[[services.web.servers]]
name = "s1"
address = "${b1!.address}"
check = false
`)
  t.after(async () => { await a.lb.stop(); await b1!.close(); rmSync(certs.dir, { recursive: true, force: true }) })
  const [alt, tls, h2s] = [await a.lb.portOf('alt'), await a.lb.portOf('tls'), await a.lb.portOf('h2s')]
  const httpsPost = (agent: https.Agent | false): Promise<number> => new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port: tls, path: '/app', method: 'POST', rejectUnauthorized: false, agent }, (r) => { r.resume(); r.on('end', () => resolve(r.statusCode!)) })
    req.on('error', reject)
    req.end('hello')
  })
  const h2get = (): Promise<number> => new Promise((resolve, reject) => {
    const s = http2.connect(`https://127.0.0.1:${h2s}`, { rejectUnauthorized: false })
    s.on('error', reject)
    const req = s.request({ ':path': '/app' })
    let status = 0
    req.on('response', (h) => { status = Number(h[':status']) })
    req.resume()
    req.on('end', () => { s.close(); resolve(status) })
  })
  const NAMES = ['web', 'alt', 'tls', 'h2s']
  const num = (m: Map<string, Record<string, string>>, ep: string, col: string): number => Number(m.get(ep)![col])
  /** The FRONTEND rows once `done` holds of them (within `ms`). */
  const until = async (done: (m: Map<string, Record<string, string>>) => boolean, what: string, ms?: number): Promise<Map<string, Record<string, string>>> => {
    let m = await frontends(a.sock)
    await waitFor(async () => {
      m = await frontends(a.sock)
      return done(m)
    }, what, ms)
    return m
  }
  const settled = (): Promise<Map<string, Record<string, string>>> => until((m) => NAMES.every((ep) => num(m, ep, 'scur') === 0), 'every connection closed')

  const before = await settled()
  // 4 connections to alt (3 answered 200, one 404), 5 https to tls with a body each, 2 h2 sessions to h2s; none to web
  for (let i = 0; i < 3; i++) assert.equal((await request(`http://127.0.0.1:${alt}/app`)).status, 200)
  assert.equal((await request(`http://127.0.0.1:${alt}/nope`)).status, 404)
  for (let i = 0; i < 5; i++) assert.equal(await httpsPost(false), 200)
  for (let i = 0; i < 2; i++) assert.equal(await h2get(), 200)
  const after = await settled()
  const delta = (ep: string, col: string): number => num(after, ep, col) - num(before, ep, col)
  assert.deepEqual(NAMES.map((ep) => delta(ep, 'stot')), [0, 4, 5, 2], 'stot: each entry point its own connections')
  assert.deepEqual(NAMES.map((ep) => delta(ep, 'conn_tot')), [0, 4, 5, 2], 'conn_tot')
  // the responses of each: req_tot and hrsp_* (2xx, 4xx, other) agree
  assert.deepEqual(NAMES.map((ep) => [delta(ep, 'req_tot'), delta(ep, 'hrsp_2xx'), delta(ep, 'hrsp_4xx'), after.get(ep)!.hrsp_other]),
    [[0, 0, 0, '0'], [4, 3, 1, '0'], [5, 5, 0, '0'], [2, 2, 0, '0']], 'req_tot, hrsp_2xx, hrsp_4xx, hrsp_other')

  // open connections: three kept alive on tls at once, then closed; smax keeps their peak
  const agent = new https.Agent({ keepAlive: true, maxSockets: 3 })
  await Promise.all([1, 2, 3].map(() => httpsPost(agent)))
  const open = await until((m) => num(m, 'tls', 'scur') === 3, 'tls scur 3')
  assert.deepEqual(NAMES.map((ep) => num(open, ep, 'scur')), [0, 0, 3, 0], 'scur')
  // the peak of scur: 3 on tls, none on web; alt's and h2s's connections came one after the other (a client's
  // next one may open before lb saw the previous close)
  assert.deepEqual([num(open, 'web', 'smax'), num(open, 'tls', 'smax')], [0, 3], 'smax of web and tls')
  assert.ok(num(open, 'alt', 'smax') >= 1 && num(open, 'h2s', 'smax') >= 1, `smax of alt ${num(open, 'alt', 'smax')}, h2s ${num(open, 'h2s', 'smax')}`)
  const held = await info(a.sock)
  assert.deepEqual([held.v.CurrConns, held.v.CurrSslConns], ['3', '3'], 'CurrConns, CurrSslConns: the https entry points\' open connections')
  agent.destroy()
  const closed = await settled()
  assert.equal(num(closed, 'tls', 'smax'), 3)

  // rates, read once a second: each entry point its own (web had no connection)
  const r = await until((m) => ['alt', 'tls', 'h2s'].every((ep) => num(m, ep, 'rate_max') >= 1), 'a connection rate on alt, tls and h2s', 5_000)
  assert.deepEqual(NAMES.map((ep) => [num(r, ep, 'rate_max'), num(r, ep, 'conn_rate_max')].map((x) => x > 0)),
    [[false, false], [true, true], [true, true], [true, true]], 'rate_max, conn_rate_max')

  // show info: the FRONTENDs add up to the process's figures
  const { v, keys } = await info(a.sock)
  const sum = (col: string, eps = NAMES): number => eps.reduce((n, ep) => n + num(r, ep, col), 0)
  assert.deepEqual([v.CumConns, v.CurrConns, v.TotalBytesIn, v.TotalBytesOut].map(Number), [sum('stot'), sum('scur'), sum('bin'), sum('bout')],
    'CumConns, CurrConns, TotalBytesIn, TotalBytesOut: the FRONTENDs\' stot, scur, bin, bout')
  // the SSL fields HAProxy 2.6 prints with OpenSSL, in its order: those of the client connections lb measures; the
  // handshake and session-cache ones it has no measure of are left out
  assert.deepEqual(keys.filter((k) => /Ssl/.test(k)),
    ['MaxSslConns', 'CurrSslConns', 'CumSslConns', 'SslRate', 'SslRateLimit', 'MaxSslRate', 'SslBackendKeyRate', 'SslBackendMaxKeyRate'])
  // MaxSslConns 0: no SSL-specific limit (HAProxy's maxsslconn unset); CumSslConns: the https FRONTENDs' stot
  assert.deepEqual([v.MaxSslConns, v.CurrSslConns, v.CumSslConns, v.SslRateLimit], ['0', '0', String(sum('stot', ['tls', 'h2s'])), '0'], 'MaxSslConns, CurrSslConns, CumSslConns, SslRateLimit')
  assert.ok(Number(v.MaxSslRate) >= 1 && Number(v.MaxSslRate) <= sum('rate_max', ['tls', 'h2s']), `MaxSslRate ${v.MaxSslRate}`)
})

test('show info: SslBackendKeyRate/SslBackendMaxKeyRate count full TLS handshakes with servers; 0 with plain HTTP servers', { timeout: 60_000 }, async (t) => {
  const certs = makeCerts()
  const [plain] = await backends(1)
  // lb's TLS to a proxied server is protocol = "h2" (ALPN h2 only), so the TLS server is node:http2's, with the test CA's certificate
  const h2 = http2.createSecureServer({ key: readFileSync(certs.server.key), cert: readFileSync(certs.server.cert) }, (_req, res) => { res.end('tls') })
  await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', resolve))
  const a = await startAdminLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.plain]
rule = "PathPrefix(\`/plain\`)"
service = "plain"
[routers.tls]
rule = "PathPrefix(\`/tls\`)"
service = "tls"
[services.plain]
keepalive = 0
[[services.plain.servers]]
name = "p1"
address = "${plain!.address}"
check = false
[services.tls]
protocol = "h2"
[services.tls.tls]
ca_file = "${certs.ca}"
[[services.tls.servers]]
name = "t1"
address = "127.0.0.1:${(h2.address() as AddressInfo).port}"
check = false
`)
  t.after(async () => {
    await a.lb.stop()
    await plain!.close()
    await new Promise<void>((resolve) => h2.close(() => resolve()))
    rmSync(certs.dir, { recursive: true, force: true })
  })
  const keyRates = (v: Record<string, string>): number[] => [Number(v.SslBackendKeyRate), Number(v.SslBackendMaxKeyRate)]
  /** /metrics lb_upstream_tls_handshakes_total: the count whose rate those are */
  const handshakes = async (): Promise<number> => Number(/^lb_upstream_tls_handshakes_total (\d+)$/m.exec((await request(`${a.dash}/metrics`)).body)?.[1])

  // plain HTTP: a new connection to the server per request (keepalive = 0), none of them TLS
  for (let i = 0; i < 5; i++) assert.equal((await request(`${a.lb.url}/plain`)).status, 200)
  // the sampler saw those connections (MaxConnRate) and then a second without any (ConnRate 0): it read the counter after them all
  const quiet = await waitFor(async () => {
    const { v } = await info(a.sock)
    return Number(v.MaxConnRate) >= 1 && v.ConnRate === '0' ? v : null
  }, 'a sample of the connections, then one without', 5_000)
  assert.deepEqual(keyRates(quiet), [0, 0], 'SslBackendKeyRate, SslBackendMaxKeyRate after plain HTTP servers only')
  assert.equal(await handshakes(), 0)

  // TLS: concurrent requests; each worker opens its own session to the server, a full handshake (lb offers no session to resume)
  const statuses = await Promise.all(Array.from({ length: 8 }, () => request(`${a.lb.url}/tls`).then((r) => r.status)))
  assert.deepEqual(statuses, Array(8).fill(200))
  const seen = await waitFor(async () => {
    const { v } = await info(a.sock)
    return keyRates(v).some((n) => n > 0) ? v : null
  }, 'SslBackendKeyRate or SslBackendMaxKeyRate > 0', 5_000)
  assert.ok(keyRates(seen).every((n) => Number.isInteger(n) && n >= 0), `${seen.SslBackendKeyRate} ${seen.SslBackendMaxKeyRate}`)
  assert.ok(await handshakes() >= 1, 'lb_upstream_tls_handshakes_total')
})

/** `echo cmd | socat`: the client's input ends right after the command. */
const halfClose = (path: string, text: string): Promise<string> => sock(path, text, true)

test('runtime socket: every command replies in full to a client that half-closes right after it (echo cmd | socat)', async (t) => {
  if (requireTool(t, 'socat', 'socat') === null) return
  const [b1, b2] = await backends(2)
  const a = await startAdminLb(simpleConfig([b1!.address, b2!.address]))
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.after(async () => { agent.destroy(); await a.lb.stop(); await b1!.close(); await b2!.close() })
  // one open client connection, so `show sess` has a line to print
  await new Promise<void>((resolve, reject) => http.get(a.lb.url, { agent }, (r) => { r.resume(); r.on('end', resolve) }).on('error', reject))
  // one line per command (each leaves the state as it found it), then the built-ins
  const lines: Record<string, string> = {
    'show info': 'show info',
    'show stat': 'show stat',
    'show sess': 'show sess',
    'show cluster': 'show cluster',
    'show models': 'show models',
    'show servers state': 'show servers state web',
    'set server': 'set server web/s1 state ready',
    'disable server': 'disable server web/s2;enable server web/s2',
    'enable server': 'enable server web/s1',
    'set weight': 'set weight web/s1 1',
    'get weight': 'get weight web/s1',
    'show table': 'show table',
    'clear table': 'clear table nope key 127.0.0.1',
  }
  assert.deepEqual(COMMANDS.map((c) => c.words.join(' ')).sort(), Object.keys(lines).sort(), 'a line for every command')
  const all = [...Object.values(lines), 'help', 'help show', 'show info;show sess;get weight web/s2', 'quit', 'no such command']
  // counters, uptimes, addresses and ages move between two calls
  const shape = (s: string): string => s.replace(/0x[0-9a-f]+/g, 'X').replace(/\d+/g, 'N')
  for (const line of all) {
    const full = await sock(a.sock, line) // keeps its input open until the server closes
    if (line !== 'quit') assert.ok(full.endsWith('\n'), `${line}: ${JSON.stringify(full)}`)
    if (line.startsWith('show sess')) assert.match(full, /^0x[0-9a-f]+: proto=tcpv4 /m)
    assert.equal(shape(await halfClose(a.sock, line + '\n')), shape(full), `net end() after "${line}"`)
    assert.equal(shape(await socat(a.sock, line + '\n')), shape(full), `socat after "${line}"`)
  }
  // an empty line is an unknown command, answered with the usage as HAProxy does, then the session closes
  for (const empty of ['\n', '\r\n', ' \t\n\n']) {
    assert.match(await halfClose(a.sock, empty), /^Unknown command\. Please enter one of the following commands only:\n {2}clear table /, JSON.stringify(empty))
  }
  // a last line without its newline is run too, then the session closes
  assert.equal(shape(await halfClose(a.sock, 'show sess')), shape(await sock(a.sock, 'show sess')))
  assert.equal(await halfClose(a.sock, 'get weight web/s1'), '1 (initial 1)\n\n')
  // interactive mode: every reply is written before the close that end of input asks for
  assert.equal(shape(await halfClose(a.sock, 'prompt\nshow sess\nget weight web/s1\n')),
    shape(`\n> ${await sock(a.sock, 'show sess')}> 1 (initial 1)\n\n> `))
})
