// The runtime socket through a real unix socket: HAProxy's protocol (';'
// separated commands, an empty line after each reply, prompt mode), its
// messages, show info/stat/sess/servers state, and server commands changing
// live traffic on every worker, showing in the APIs and surviving a reload.
import assert from 'node:assert/strict'
import { statSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { test } from 'node:test'
import { count, getMany, reloadApplied, simpleConfig, waitFor } from '../helpers.js'
import { COMMANDS } from '../../core/admin/runtime/commands.js'
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
