// The reliability campaign of issue 30 as commands anyone can run (after
// `npm run build`; wrk and nginx-light from Debian):
//
//   node dist/bench/faults/campaign.js reload        # SIGHUP every 0.5 s under wrk, lb and nginx
//   node dist/bench/faults/campaign.js kill9-writes  # kill -9 during config API writes, then restart
//   node dist/bench/faults/campaign.js backend-kill  # one of 3 backends killed (SIGKILL) under wrk, lb and nginx
//   node dist/bench/faults/campaign.js drain         # SIGTERM with requests longer than the drain time-out
//   node dist/bench/faults/campaign.js cert-swap     # certificate swapped and reloaded every 150 ms under handshakes
//   node dist/bench/faults/campaign.js auth-flood    # wrk on an open route while 8 clients send wrong passwords (bcrypt)
//   node dist/bench/faults/campaign.js all
//
// Each case prints one Markdown table row per target; bench/RESULTS.md keeps the figures.
import bcrypt from 'bcryptjs'
import { chmodSync, copyFileSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrateReq } from '../../core/net/listener-swap.js'
import { type Pair, handshake, makeCerts, makePair, migrateRequests } from '../../test/tls/certs.js'
import { simpleConfig } from '../../test/helpers.js'
import { type Proc, backend, freePort, lb, nginx, sleep, upstreams, waitExit, wrk } from './procs.js'

const SECONDS = Number(process.env.SECONDS ?? 8)
const GLOBAL = '[global]\nworkers = 2\naccess_log = "off"\n'
const lbConfig = (ports: number[], service = '', global = GLOBAL): string => `${global}\n${simpleConfig(ports.map((p) => `127.0.0.1:${p}`), service)}`

const row = (...cells: Array<string | number>): void => console.log(`| ${cells.join(' | ')} |`)
const stopAll = (ps: Proc[]): void => { for (const p of ps) p.proc.kill('SIGKILL') }

async function reload (): Promise<void> {
  const bs = [await backend('a'), await backend('b')]
  row('target', 'reloads', 'requests', 'non-2xx', 'socket errors')
  for (const target of ['lb', 'nginx']) {
    const p = target === 'lb'
      ? await lb(lbConfig(bs.map((b) => b.port)))
      : await nginx(`upstream web { ${upstreams(bs.map((b) => b.port))} keepalive 32; }\nserver { listen 127.0.0.1:{{PORT}}; location / { proxy_pass http://web; proxy_http_version 1.1; proxy_set_header Connection ""; } }`)
    let reloads = 0
    const timer = setInterval(() => { p.proc.kill('SIGHUP'); reloads++ }, 500)
    const r = await wrk(`http://127.0.0.1:${p.port}/`, SECONDS, 32)
    clearInterval(timer)
    row(target, reloads, r.requests, r.non2xx, r.socketErrors)
    p.proc.kill('SIGKILL')
    await waitExit(p.proc)
  }
  stopAll(bs)
}

function post (port: number, path: string, body: string): Promise<{ status: number, version: string }> {
  return new Promise((res, rej) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (r) => {
      r.resume()
      r.on('end', () => res({ status: r.statusCode!, version: String(r.headers['configuration-version']) }))
    })
    req.on('error', rej)
    req.end(body)
  })
}

function get (port: number, path: string): Promise<string> {
  return new Promise((res, rej) => {
    http.get({ host: '127.0.0.1', port, path, agent: false }, (r) => {
      let b = ''
      r.on('data', (d: Buffer) => { b += d.toString() })
      r.on('end', () => res(b))
    }).on('error', rej)
  })
}

async function kill9Writes (): Promise<void> {
  const rounds = Number(process.env.ROUNDS ?? 20)
  const b = await backend('a')
  const adminPort = await freePort()
  const toml = lbConfig([b.port]) + `\n[admin]\nenabled = true\naddress = "127.0.0.1:${adminPort}"\n`
  const managed = /"msg":"ready"/
  let p = await lb(toml, undefined, undefined, managed)
  const acked = new Set<string>()
  let failedStarts = 0
  let lost = 0
  for (let round = 0; round < rounds; round++) {
    let stop = false
    const writers = [0, 1, 2, 3].map(async (w) => {
      for (let i = 0; !stop; i++) {
        const name = `r${round}w${w}n${i}`
        try {
          const r = await post(adminPort, '/v2/services/lb/configuration/backends', JSON.stringify({ name }))
          if (r.status === 201) acked.add(name)
        } catch { return }
      }
    })
    await sleep(200 + Math.random() * 600)
    p.proc.kill('SIGKILL')
    await waitExit(p.proc)
    stop = true
    await Promise.all(writers)
    try {
      p = await lb(toml, p.dir, p.port, managed)
    } catch {
      failedStarts++
      break
    }
    const names = new Set((JSON.parse(await get(adminPort, '/v2/services/lb/configuration/backends')) as { data: Array<{ name: string }> }).data.map((x) => x.name))
    for (const n of acked) if (!names.has(n)) lost++
    // stay under the services capacity: delete what this round wrote once it has been checked
    if (names.size > 150) {
      p.proc.kill('SIGKILL')
      await waitExit(p.proc)
      const { rmSync } = await import('node:fs')
      rmSync(`${p.dir}/run/config-api.json`, { force: true })
      acked.clear()
      p = await lb(toml, p.dir, p.port, managed)
    }
  }
  row('target', 'kill -9', 'acknowledged writes', 'lost after restart', 'failed starts')
  row('lb', rounds, acked.size, lost, failedStarts)
  p.proc.kill('SIGKILL')
  b.proc.kill('SIGKILL')
}

/** Counts which backend answered `n` sequential GETs. */
async function shares (port: number, n: number): Promise<Record<string, number>> {
  const c: Record<string, number> = {}
  for (let i = 0; i < n; i++) {
    const body = (await get(port, '/').catch(() => 'error')).trim()
    c[body] = (c[body] ?? 0) + 1
  }
  return c
}

async function backendKill (): Promise<void> {
  row('target', 'requests', 'non-2xx', 'socket errors', 'shares of the 2 left (of 3,000)')
  for (const target of ['lb', 'nginx']) {
    const bs = [await backend('a', 1), await backend('b', 1), await backend('c', 1)]
    const ports = bs.map((b) => b.port)
    const p = target === 'lb'
      ? await lb(lbConfig(ports))
      : await nginx(`upstream web { ${upstreams(ports)} keepalive 32; }\nserver { listen 127.0.0.1:{{PORT}}; location / { proxy_pass http://web; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_next_upstream error timeout; } }`)
    const load = wrk(`http://127.0.0.1:${p.port}/`, SECONDS, 32)
    await sleep(SECONDS * 300)
    bs[0]!.proc.kill('SIGKILL')
    const r = await load
    const c = await shares(p.port, 3_000)
    row(target, r.requests, r.non2xx, r.socketErrors, `b ${c.b ?? 0}, c ${c.c ?? 0}${c.a !== undefined ? `, a ${c.a}` : ''}${c.error !== undefined ? `, errors ${c.error}` : ''}`)
    p.proc.kill('SIGKILL')
    stopAll(bs)
  }
}

/** `n` GETs held open; each resolves with its status line ('' when the connection closed without one). */
function waiting (port: number, n: number): Array<Promise<string>> {
  return Array.from({ length: n }, () => new Promise<string>((res) => {
    const s = net.connect(port, '127.0.0.1', () => s.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'))
    let out = ''
    s.on('data', (d: Buffer) => { out += d.toString('latin1') })
    s.on('error', () => {})
    s.on('close', () => res(out.split('\r\n')[0]!))
  }))
}

async function drain (): Promise<void> {
  const b = await backend('slow', 3_000)
  row('target', 'exit', 'clients answered 503', 'closed without a status line', 'seconds to exit')
  for (const target of ['lb', 'nginx']) {
    const p = target === 'lb'
      ? await lb(lbConfig([b.port], '', GLOBAL + 'drain_timeout = "2s"\n'))
      : await nginx(`upstream web { ${upstreams([b.port])} }\nserver { listen 127.0.0.1:{{PORT}}; location / { proxy_pass http://web; } }`, 'worker_shutdown_timeout 2s;')
    const clients = waiting(p.port, 20)
    await sleep(500)
    const t0 = Date.now()
    p.proc.kill(target === 'lb' ? 'SIGTERM' : 'SIGQUIT') // nginx's graceful shutdown is SIGQUIT
    const exit = await waitExit(p.proc)
    const lines = await Promise.all(clients)
    row(target, exit.signal ?? exit.code ?? '', lines.filter((l) => / 503 /.test(l)).length, lines.filter((l) => l === '').length, ((Date.now() - t0) / 1000).toFixed(1))
  }
  b.proc.kill('SIGKILL')
}

/**
 * New TLS handshakes from CLIENTS loops while the certificate files are swapped
 * and reloaded (SIGHUP) 40 times, 150 ms apart: how many fail. lb with
 * net.ipv4.tcp_migrate_req as found and, when root, as 1 (core/net/listener-swap.ts); nginx.
 */
async function certSwap (): Promise<void> {
  const CLIENTS = Number(process.env.CLIENTS ?? 2)
  const certs = makeCerts()
  const live = { cert: join(certs.dir, 'live.crt'), key: join(certs.dir, 'live.key') }
  const pairs: Pair[] = [certs.server, makePair(certs.dir, 'next', 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])]
  const put = (p: Pair): void => {
    for (const [from, to] of [[p.key, live.key], [p.cert, live.cert]] as const) {
      copyFileSync(from, to + '.tmp')
      renameSync(to + '.tmp', to) // key first, each replaced whole (certbot's way)
    }
  }
  const b = await backend('a')
  const lbToml = `${GLOBAL}[entrypoints.websecure]\naddress = "127.0.0.1:{{PORT}}"\nprotocol = "https"\n` +
    `[entrypoints.websecure.tls]\ncert = "${live.cert}"\nkey = "${live.key}"\n` +
    `[routers.web]\nrule = "PathPrefix(\`/\`)"\nservice = "web"\n[[services.web.servers]]\naddress = "127.0.0.1:${b.port}"\ncheck = false\n`
  row('target', 'tcp_migrate_req', 'reloads', 'handshakes', 'failed')
  const found = migrateReq()
  const runs: Array<[string, string]> = [['lb', found], ...(found === '0' ? [['lb', '1'] as [string, string]] : []), ['nginx', 'n/a']]
  for (const [target, setting] of runs) {
    const m = setting === '1' && found === '0' ? migrateRequests() : null // set for this row, then put back
    if (m?.on === false) continue // not root
    put(pairs[0]!)
    const p = target === 'lb'
      ? await lb(lbToml)
      : await nginx(`server { listen 127.0.0.1:{{PORT}} ssl; ssl_certificate ${live.cert}; ssl_certificate_key ${live.key}; location / { return 200; } }`)
    let stop = false
    let ok = 0
    let failed = 0
    const loops = Array.from({ length: CLIENTS }, async () => {
      while (!stop) await handshake(p.port, {}, 0).then(() => ok++, () => failed++)
    })
    for (let i = 1; i <= 40; i++) {
      put(pairs[i % 2]!)
      p.proc.kill('SIGHUP')
      await sleep(150)
    }
    stop = true
    await Promise.all(loops)
    p.proc.kill('SIGKILL')
    m?.restore()
    row(target, setting === '' ? 'absent' : setting, 40, ok + failed, failed)
  }
  b.proc.kill('SIGKILL')
  rmSync(certs.dir, { recursive: true, force: true })
}

/**
 * wrk -c32 on an open route, alone and while 8 clients send wrong passwords to a
 * basicAuth route (bcrypt cost 10, distinct passwords: no cache helps) in a loop.
 */
async function authFlood (): Promise<void> {
  const b = await backend('a')
  const hash = bcrypt.hashSync('right', 10)
  const dir = mkdtempSync(join(tmpdir(), 'lb-auth-flood-'))
  writeFileSync(join(dir, 'htpasswd'), `eve:${hash}\n`, { mode: 0o644 })
  chmodSync(dir, 0o755) // nginx's workers run as nobody when the campaign runs as root
  row('target', 'open route alone (req/s)', 'during the flood (req/s)', 'kept', 'wrong passwords answered')
  for (const target of ['lb', 'nginx']) {
    const p = target === 'lb'
      ? await lb(`${GLOBAL}[middlewares.auth]\ntype = "basicAuth"\nusers = ["eve:${hash}"]\n` +
        simpleConfig([`127.0.0.1:${b.port}`]).replace('[routers.web]', '[routers.private]\nrule = "PathPrefix(`/private`)"\nservice = "web"\nmiddlewares = ["auth"]\n\n[routers.web]'))
      : await nginx(`upstream web { ${upstreams([b.port])} keepalive 32; }\nserver { listen 127.0.0.1:{{PORT}}; location / { proxy_pass http://web; proxy_http_version 1.1; proxy_set_header Connection ""; } ` +
        `location /private { auth_basic "x"; auth_basic_user_file ${dir}/htpasswd; proxy_pass http://web; } }`)
    const alone = await wrk(`http://127.0.0.1:${p.port}/`, SECONDS, 32)
    let stop = false
    const answered: Record<number, number> = {}
    let n = 0
    const flood = Array.from({ length: 8 }, async () => {
      while (!stop) {
        const auth = 'Basic ' + Buffer.from(`eve:guess-${n++}`).toString('base64')
        await new Promise<void>((resolve) => {
          http.get({ host: '127.0.0.1', port: p.port, path: '/private', agent: false, headers: { authorization: auth } }, (r) => { r.resume(); answered[r.statusCode!] = (answered[r.statusCode!] ?? 0) + 1; resolve() }).on('error', () => resolve())
        })
      }
    })
    const during = await wrk(`http://127.0.0.1:${p.port}/`, SECONDS, 32)
    stop = true
    await Promise.all(flood)
    row(target, Math.round(alone.rps), Math.round(during.rps), `${Math.round(100 * during.rps / alone.rps)}%`, Object.entries(answered).map(([k, v]) => `${v} × ${k}`).join(', '))
    p.proc.kill('SIGKILL')
    await waitExit(p.proc)
  }
  b.proc.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
}

const cases: Record<string, () => Promise<void>> = { reload, 'kill9-writes': kill9Writes, 'backend-kill': backendKill, drain, 'cert-swap': certSwap, 'auth-flood': authFlood }
const which = process.argv[2] ?? 'all'
for (const [name, run] of Object.entries(cases)) {
  if (which !== 'all' && which !== name) continue
  console.log(`\n### ${name}\n`)
  await run()
}
process.exit(0)
