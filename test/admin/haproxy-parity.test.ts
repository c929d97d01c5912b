// lb's runtime socket beside a real HAProxy 2.6 (Debian package "haproxy")
// under the same paced load: `show info` prints HAProxy's fields in its
// order, and the `show stat` fields that HAProxy fills from time (rate,
// rate_max, req_rate, req_rate_max, lastsess, chkfail, chkdown, downtime,
// qtime/ctime/rtime/ttime) carry the same meaning in both. Plus the runtime details HAProxy defines:
// srv_check_status 15 for L7OK, drain keeps srv_op_state 2, `set weight 50%`
// of 1 is 0, smax is the peak of requests in flight.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { type Backend, freePort, request, sleep, startBackend } from '../helpers.js'
import { requireTool, sock, startAdminLb } from './util.js'

/** HAProxy 2.6 `show info` fields lb has no measure of, skipped rather than printed as an untrue zero. */
const SKIPPED = ['CompressBpsIn', 'CompressBpsOut', 'FailedResolutions']
/** fields of later HAProxy versions (and lb's TotalBytesIn) that lb prints after 2.6's */
const EXTRA = ['TotalBytesIn', 'CurrStreams', 'CumStreams', 'NbThreadGroups']

interface Hap { proc: ChildProcess, sock: string, port: number, dir: string }

async function startHaproxy (bin: string, servers: string[]): Promise<Hap> {
  const dir = mkdtempSync(join(tmpdir(), 'lb-haproxy-'))
  const port = await freePort()
  const path = join(dir, 'h.sock')
  writeFileSync(join(dir, 'h.cfg'), `global
  stats socket ${path} mode 600 level admin
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
frontend web
  bind 127.0.0.1:${port}
  default_backend web
backend web
  option httpchk GET /
  default-server inter 200 rise 1 fall 1
${servers.map((s, i) => `  server s${i + 1} ${s} check`).join('\n')}
`)
  const proc = spawn(bin, ['-db', '-f', join(dir, 'h.cfg')], { stdio: ['ignore', 'ignore', 'pipe'] })
  const deadline = Date.now() + 10_000
  for (;;) {
    const ok = await sock(path, 'show info').then((t) => t.includes('Name: HAProxy'), () => false)
    if (ok) break
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error('haproxy did not start')
    await sleep(50)
  }
  return { proc, sock: path, port, dir }
}

type Stat = Map<string, Record<string, string>>

/** `show stat` as rows keyed "pxname/svname" (the frontend and backend share the name "web"). */
async function stat (path: string): Promise<Stat> {
  const lines = (await sock(path, 'show stat')).trim().split('\n')
  const header = lines[0]!.slice(2).split(',')
  const out: Stat = new Map()
  for (const l of lines.slice(1)) {
    const cells = l.split(',')
    const row = Object.fromEntries(header.map((h, i) => [h, cells[i] ?? '']))
    out.set(`${row.pxname}/${row.svname}`, row)
  }
  return out
}

const keys = (info: string): string[] => info.trim().split('\n').map((l) => l.slice(0, l.indexOf(':')))

test('show info and show stat beside HAProxy 2.6 under the same load', { timeout: 60_000 }, async (t) => {
  const bin = requireTool(t, 'haproxy', 'haproxy')
  if (bin === null) return
  const slow = (ms: number) => (req: Parameters<NonNullable<Parameters<typeof startBackend>[1]>>[0], res: Parameters<NonNullable<Parameters<typeof startBackend>[1]>>[1]) => {
    req.resume()
    setTimeout(() => res.end('ok\n'), req.url === '/slow' ? ms : 0)
  }
  const b1 = await startBackend('b1', slow(1500))
  const b2 = await startBackend('b2')
  const dead = `127.0.0.1:${await freePort()}` // nothing listens: checks fail
  const backendsUsed: Backend[] = [b1, b2]
  const hap = await startHaproxy(bin, [b1.address, b2.address, dead])
  const a = await startAdminLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
${[b1.address, b2.address, dead].map((s, i) => `[[services.web.servers]]\nname = "s${i + 1}"\naddress = "${s}"\n`).join('')}
[services.web.health_check]
path = "/"
interval = "200ms"
rise = 1
fall = 1
`)
  t.after(async () => {
    hap.proc.kill('SIGKILL')
    rmSync(hap.dir, { recursive: true, force: true })
    await a.lb.stop()
    for (const b of backendsUsed) await b.close()
  })

  // show info: HAProxy's fields, in HAProxy's order, none missing but the unmeasured ones
  const hapKeys = keys(await sock(hap.sock, 'show info'))
  const lbInfo = await sock(a.sock, 'show info')
  const lbKeys = keys(lbInfo).filter((k) => !EXTRA.includes(k))
  assert.deepEqual(lbKeys, hapKeys.filter((k) => !SKIPPED.includes(k)), 'show info: HAProxy 2.6 fields and order')
  assert.match(lbInfo, /^Release_date: \d{4}\/\d\d\/\d\d$/m)
  assert.match(lbInfo, /^Ulimit-n: [1-9]\d*$/m)
  assert.match(lbInfo, /^Idle_pct: \d+$/m)

  // s2 takes no traffic in either (weight 0); s3 fails its checks in both
  for (const s of [hap.sock, a.sock]) assert.equal(await sock(s, 'set weight web/s2 0'), '\n')
  // the same paced load on both: 3 s at about 40 requests a second
  const lbUrl = a.lb.url
  const hapUrl = `http://127.0.0.1:${hap.port}`
  const end = Date.now() + 3_000
  let sent = 0
  while (Date.now() < end) {
    await Promise.all([request(`${lbUrl}/`), request(`${hapUrl}/`)])
    sent++
    await sleep(20) // the pacing is the thing compared: the same request rate on both
  }
  const [h, l] = [await stat(hap.sock), await stat(a.sock)]
  for (const [name, s] of [['haproxy', h], ['lb', l]] as const) {
    const fe = s.get('web/FRONTEND')!
    const s1 = s.get('web/s1')!
    const s2 = s.get('web/s2')!
    const s3 = s.get('web/s3')!
    const be = s.get('web/BACKEND')!
    assert.equal(fe.req_tot, String(sent), `${name}: FRONTEND req_tot`)
    assert.equal(s1.lbtot, String(sent), `${name}: s1 lbtot`)
    // per-second rates: about 40/s; the peak at least the last second's
    for (const [what, v] of [['FRONTEND req_rate_max', fe.req_rate_max], ['s1 rate_max', s1.rate_max], ['BACKEND rate_max', be.rate_max]] as const) {
      assert.ok(Number(v) >= 0.5 * sent / 3 && Number(v) <= 2 * sent / 3, `${name}: ${what} ${v} for ${sent} requests in 3 s`)
    }
    assert.ok(Number(fe.req_rate) <= Number(fe.req_rate_max), `${name}: req_rate <= req_rate_max`)
    assert.ok(Number(s1.rate) <= Number(s1.rate_max), `${name}: rate <= rate_max`)
    // seconds since the last session: just now for s1, never (-1) for s2
    assert.ok(['0', '1'].includes(s1.lastsess!), `${name}: s1 lastsess ${s1.lastsess}`)
    assert.equal(s2.lastsess, '-1', `${name}: s2 never picked`)
    assert.ok(['0', '1'].includes(be.lastsess!), `${name}: BACKEND lastsess ${be.lastsess}`)
    // the dead server: failed checks, one UP->DOWN, down for seconds
    assert.equal(s3.status, 'DOWN', `${name}: s3`)
    assert.ok(Number(s3.chkfail) >= 1, `${name}: s3 chkfail ${s3.chkfail}`)
    assert.equal(s3.chkdown, '1', `${name}: s3 chkdown`)
    assert.ok(Number(s3.downtime) >= 2, `${name}: s3 downtime ${s3.downtime}`)
    assert.equal(s1.chkdown, '0', `${name}: s1 chkdown`)
    assert.equal(s1.downtime, '0', `${name}: s1 downtime`)
    assert.equal(be.chkdown, '0', `${name}: BACKEND never down`)
    // a server's bin/bout: what crossed its socket, heads included (a GET has no body)
    assert.ok(Number(s1.bin) >= sent * 40, `${name}: s1 bin ${s1.bin} for ${sent} requests`)
  }
  // FRONTEND bin: the clients' requests, heads included (HAProxy 2.6 counts its internal HTX form of
  // them, a few bytes under the wire size; lb the wire size: below, to the byte)
  const feIn = (x: Stat): number => Number(x.get('web/FRONTEND')!.bin) / sent
  assert.ok(feIn(h) > 40 && feIn(l) >= feIn(h) && feIn(l) <= 1.2 * feIn(h), `request bytes per request: lb ${feIn(l)}, haproxy ${feIn(h)}`)
  const raw = 'POST /in?x=1 HTTP/1.1\r\nHost: example\r\nContent-Length: 5\r\nX-Test: abc\r\n\r\nhello'
  const before = Number(l.get('web/FRONTEND')!.bin)
  await new Promise<void>((resolve, reject) => {
    const c = net.connect(a.lb.port, '127.0.0.1', () => c.write(raw))
    c.on('data', () => c.end())
    c.on('close', () => resolve())
    c.on('error', reject)
  })
  assert.equal(Number((await stat(a.sock)).get('web/FRONTEND')!.bin) - before, Buffer.byteLength(raw), 'bin counts a request to the byte')
  // bout: every response as read, head and body: the same size each time (the server's answers only
  // differ by their Date), well over the 3-byte body (the two proxies' requests differ, so their servers' answers do too)
  for (const [name, x] of [['haproxy', h], ['lb', l]] as const) {
    const per = Number(x.get('web/s1')!.bout) / Number(x.get('web/s1')!.lbtot)
    assert.ok(Number.isInteger(per) && per > 60, `${name}: ${per} bytes per response`)
  }

  // smax: the peak of requests in flight on a server (three slow requests at once, to both)
  await Promise.all([1, 2, 3].flatMap(() => [request(`${lbUrl}/slow`), request(`${hapUrl}/slow`)]))
  const [h2, l2] = [await stat(hap.sock), await stat(a.sock)]
  const s1 = l2.get('web/s1')!
  assert.ok(Number(s1.smax) >= 3, `s1 smax ${s1.smax}`)
  assert.equal(s1.scur, '0')
  // qtime/ctime/rtime/ttime: averages (ms) over the last requests; the same load gives the same figures
  // (about 3 × 1500 ms spread over the requests), no queue and reused connections in both
  const hs1 = h2.get('web/s1')!
  for (const [name, r] of [['haproxy', hs1], ['lb', s1], ['haproxy backend', h2.get('web/BACKEND')!], ['lb backend', l2.get('web/BACKEND')!]] as const) {
    assert.equal(r.qtime, '0', `${name}: qtime`)
    assert.ok(Number(r.ctime) <= 2, `${name}: ctime ${r.ctime}`)
    const expected = (3 * 1500) / (sent + 3)
    assert.ok(Math.abs(Number(r.rtime) - expected) <= Math.max(10, 0.4 * expected), `${name}: rtime ${r.rtime}, expected about ${expected}`)
    assert.ok(Number(r.ttime) >= Number(r.rtime), `${name}: ttime ${r.ttime} >= rtime ${r.rtime}`)
  }

  // show servers state: L7OK is check status 15 as in HAProxy; drain keeps the server running (op state 2)
  for (const s of [hap.sock, a.sock]) assert.equal(await sock(s, 'set server web/s1 state drain'), '\n')
  const row = async (path: string): Promise<string[]> => (await sock(path, 'show servers state web')).split('\n').find((x) => / s1 /.test(x))!.split(' ')
  // HAProxy resets a server's check result to 0 (unknown) while a check of it runs: with checks every 200 ms
  // on a busy machine the peer's row can be read mid-check, so it is read again until one is done (lb keeps
  // the last result, its row is read once)
  let hr = await row(hap.sock)
  for (let i = 0; i < 50 && hr[11] === '0'; i++) {
    await sleep(50)
    hr = await row(hap.sock)
  }
  const lr = await row(a.sock)
  for (const [name, r] of [['haproxy', hr], ['lb', lr]] as const) {
    assert.equal(r[5], '2', `${name}: srv_op_state of a drained server`)
    assert.equal(r[6], '8', `${name}: srv_admin_state forced drain`)
    assert.equal(r[10], '15', `${name}: srv_check_status L7OK`)
    assert.equal(r[11], '3', `${name}: srv_check_result passed`)
  }
  // set weight 50% of an initial weight of 1 is 0 (integer division), in both
  for (const s of [hap.sock, a.sock]) {
    assert.equal(await sock(s, 'set weight web/s1 50%'), '\n')
    assert.equal(await sock(s, 'get weight web/s1'), '0 (initial 1)\n\n')
  }
})
