// ACME certificate resolvers against Let's Encrypt's test CA, pebble (Debian
// package, test/tls/pebble.ts), on loopback: pebble validates http-01 on lb's
// http entry point, whose router redirects everything to https (the answers
// come before routing). Certificates are checked from the outside with node:tls
// against pebble's root; renewal under an open keep-alive connection; pebble
// down at start; the storage file across a restart; `lb check` refusals; and
// tls-alpn-01 on an https entry point terminated in node:tls (uWS negotiates
// no ALPN).
import { strict as assert } from 'node:assert'
import { spawnSync } from 'node:child_process'
import { readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import tls from 'node:tls'
import { after, before, describe, test } from 'node:test'
import { type Backend, CLI, type Lb, crashRouter, freePort, request, startBackend, startLb, tempDir } from '../helpers.js'
import { type AdminLb, json, requireTool, restartLb, startAdminLb, waitLog } from '../admin/util.js'
import { type Certs, fingerprint, makeCerts, sClient } from './certs.js'
import { type Pebble, planPebble, stopDns } from './pebble.js'
import { fill, mountTmpfs } from '../tmpfs.js'

interface Peer { serial: string, issuer: string, names: string, fingerprint: string, curve: string, bits: number }

/** The certificate lb presents for `servername`; with `root`, the handshake must verify chain and name against it. */
function peer (port: number, servername: string, root?: string): Promise<Peer> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, servername, ...(root !== undefined ? { ca: root, rejectUnauthorized: true } : { rejectUnauthorized: false }) }, () => {
      const c = s.getPeerCertificate()
      s.end()
      resolve({ serial: c.serialNumber, issuer: String(c.issuer.CN ?? ''), names: c.subjectaltname ?? '', fingerprint: c.fingerprint256, curve: c.asn1Curve ?? '', bits: c.bits ?? 0 })
    })
    s.on('error', reject)
  })
}

/** A keep-alive TLS connection sending one request at a time; resolves each with the response head's status line. */
function keepAlive (port: number, servername: string): Promise<{ socket: tls.TLSSocket, get: () => Promise<string> }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false }, () => {
      let buf = ''
      let waiting: ((line: string) => void) | null = null
      socket.setEncoding('utf8')
      socket.on('data', (d: string) => {
        buf += d
        // the backend's answers are small and carry Content-Length: one read holds head and body
        const end = buf.indexOf('\r\n\r\n')
        if (end < 0 || waiting === null) return
        const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0)
        if (buf.length < end + 4 + len) return
        const line = buf.slice(0, buf.indexOf('\r\n'))
        buf = buf.slice(end + 4 + len)
        const w = waiting
        waiting = null
        w(line)
      })
      resolve({
        socket,
        get: () => new Promise((res, rej) => {
          if (socket.destroyed) return rej(new Error('connection closed'))
          waiting = res
          socket.once('close', () => rej(new Error('connection closed')))
          socket.write(`GET / HTTP/1.1\r\nhost: ${servername}\r\n\r\n`)
        }),
      })
    })
    socket.on('error', reject)
  })
}

function resolverToml (p: Pebble, extra = ''): string {
  return `[certificates_resolvers.pebble.acme]
email = "ops@lb.test"
ca_server = "${p.directory}"
ca_certificate = "${p.caCertificate}"
storage = "acme-pebble.json"
${extra}
[certificates_resolvers.pebble.acme.http_challenge]
entrypoint = "web"
`
}

/** web (http, everything redirected to https) and websecure (https, default certificate `certs.server`), router app for a.lb.test (+ b.lb.test). */
function lbToml (certs: Certs, httpPort: number, backend: string, resolver: string, certResolver = 'pebble'): string {
  return `[entrypoints.web]
address = "127.0.0.1:${httpPort}"
[entrypoints.websecure]
address = "127.0.0.1:{{PORT}}"
protocol = "https"
[entrypoints.websecure.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"

${resolver}
[middlewares.to-https]
type = "redirectScheme"
scheme = "https"
permanent = true

[routers.to-https]
rule = "PathPrefix(\`/\`)"
entrypoints = ["web"]
middlewares = ["to-https"]
service = "app"

[routers.app]
rule = "Host(\`a.lb.test\`)"
entrypoints = ["websecure"]
service = "app"
[routers.app.tls]
cert_resolver = "${certResolver}"
domains = ["b.lb.test"]

${crashRouter('app')}
[services.app]
[[services.app.servers]]
address = "${backend}"
check = false
`
}

/** `lb check` on this text: exit status and output. */
function check (text: string): { status: number | null, out: string } {
  const file = join(tempDir(), 'lb.toml')
  writeFileSync(file, text)
  const r = spawnSync(process.execPath, [CLI, 'check', '-c', file], { encoding: 'utf8' })
  return { status: r.status, out: r.stdout + r.stderr }
}

// installed by the test command (test/tools.sh) where it can
const PEBBLE = spawnSync('sh', ['-c', 'command -v pebble && command -v pebble-challtestsrv'], { stdio: 'ignore' }).status === 0
const NO_PEBBLE = PEBBLE ? false : 'pebble is not installed and the test command could not install it (apt-get install -y pebble as root)'

let certs: Certs
let backend: Backend
before(async () => {
  certs = makeCerts()
  backend = await startBackend('app')
})
after(async () => {
  await backend.close()
  await stopDns()
})

describe('pebble down at start, then http-01 issuance, dashboard and metrics, storage across a restart', { timeout: 120_000, skip: NO_PEBBLE }, () => {
  let pebble: Pebble, a: AdminLb, httpPort: number
  before(async () => {
    // a port of our choosing, not 0: pebble validates http-01 on it, so it must know it before lb starts
    httpPort = await freePort()
    pebble = await planPebble({ httpPort }) // not started yet: lb's first orders fail
    a = await startAdminLb(lbToml(certs, httpPort, backend.address, resolverToml(pebble)))
  })
  after(async () => {
    await a?.lb.stop()
    await pebble?.stop()
  })

  test('while the CA is down: the default certificate is served, the failure is logged and retried, the API says failing', async () => {
    await waitLog(a.lb, /retrying in 2s/, 15_000)
    assert.match(a.lb.log(), /certificate resolver pebble: cannot obtain a certificate for a\.lb\.test, b\.lb\.test \(directory https:\/\/127\.0\.0\.1:\d+\/dir: connect ECONNREFUSED .*\); retrying in 1s/)
    const p = await peer(a.lb.port, 'a.lb.test')
    assert.equal(p.fingerprint, fingerprint(certs.server.cert))
    // and the router answers on it
    const conn = await keepAlive(a.lb.port, 'a.lb.test')
    assert.equal(await conn.get(), 'HTTP/1.1 200 OK')
    conn.socket.end()
    const r = await json(`${a.dash}/api/certificates`)
    const [c] = r.json as Array<Record<string, unknown>>
    assert.equal(c!.status, 'failing')
    assert.deepEqual(c!.domains, ['a.lb.test', 'b.lb.test'])
    assert.ok((c!.failures as number) >= 1)
    assert.match(c!.lastError as string, /ECONNREFUSED/)
  })

  let issued: Peer
  test('once the CA is up: a certificate for the router\'s names, chaining to pebble\'s root, served by SNI', async () => {
    await pebble.start()
    await waitLog(a.lb, /"msg":"certificate obtained"/, 30_000)
    const root = await pebble.rootPem()
    issued = await peer(a.lb.port, 'a.lb.test', root) // verifies chain and name, or throws
    assert.match(issued.issuer, /^Pebble Intermediate CA/)
    assert.equal(issued.names, 'DNS:a.lb.test, DNS:b.lb.test')
    assert.equal(issued.curve, 'prime256v1') // key_type's default: EC P-256
    assert.equal((await peer(a.lb.port, 'b.lb.test', root)).serial, issued.serial)
    // other names and clients without SNI keep the entry point's certificate
    assert.equal((await peer(a.lb.port, 'other.lb.test')).fingerprint, fingerprint(certs.server.cert))
    // served by every worker: new connections land on both (SO_REUSEPORT); 8 in a row all get it
    for (let i = 0; i < 8; i++) assert.equal((await peer(a.lb.port, 'a.lb.test', root)).serial, issued.serial)
  })

  test('http-01 answers come before routing: with no order in progress the same path is redirected like any other', async () => {
    const r = await request(`http://127.0.0.1:${httpPort}/.well-known/acme-challenge/none`, { headers: { host: 'a.lb.test' } })
    assert.equal(r.status, 301)
  })

  test('the dashboard API and /metrics show the certificate', async () => {
    const [c] = (await json(`${a.dash}/api/certificates`)).json as Array<Record<string, unknown>>
    assert.equal(c!.status, 'valid')
    assert.equal(c!.name, 'a.lb.test@pebble')
    assert.equal(c!.failures, 0)
    assert.match(c!.issuer as string, /CN=Pebble Intermediate CA/)
    assert.equal((c!.serial as string).toUpperCase(), issued.serial.toUpperCase())
    assert.ok(Date.parse(c!.notAfter as string) > Date.now() + 86_400_000)
    const router = (await json(`${a.dash}/api/http/routers/app@file`)).json as Record<string, unknown>
    assert.deepEqual(router.tls, { certResolver: 'pebble', domains: [{ main: 'b.lb.test', sans: [] }] })
    const m = (await request(`${a.dash}/metrics`)).body
    assert.match(m, /^lb_acme_orders_total\{resolver="pebble",outcome="success"\} 1$/m)
    assert.match(m, /^lb_acme_orders_total\{resolver="pebble",outcome="failure"\} [1-9]\d*$/m)
    assert.match(m, /^lb_acme_certificate_expiry_timestamp_seconds\{resolver="pebble",domain="a\.lb\.test"\} \d+$/m)
    assert.match(m, /^lb_acme_certificate_failures\{resolver="pebble",domain="a\.lb\.test"\} 0$/m)
  })

  test('the storage file (mode 0600) survives a restart: the same certificate is served without a new order', async () => {
    await a.lb.stop()
    const file = join(a.lb.dir, 'run', 'acme-pebble.json')
    assert.equal(statSync(file).mode & 0o777, 0o600)
    const stored = JSON.parse(readFileSync(file, 'utf8')) as { ca_server: string, account: { url: string }, certificates: Array<{ domains: string[] }> }
    assert.equal(stored.ca_server, pebble.directory)
    assert.match(stored.account.url, /^https:\/\/127\.0\.0\.1:\d+\/my-account\//)
    assert.deepEqual(stored.certificates.map((c) => c.domains), [['a.lb.test', 'b.lb.test']])
    a = await restartLb(a)
    const root = await pebble.rootPem()
    // from the first connection after ready, in both workers: the workers start with the stored certificate,
    // rather than get it later and swap their listeners (a reset for a connection caught in the swap)
    for (let i = 0; i < 8; i++) assert.equal((await peer(a.lb.port, 'a.lb.test', root)).serial, issued.serial)
    assert.doesNotMatch(a.lb.log(), /ordering certificate|renewing certificate|TLS certificates reloaded/)
  })

  test('a restarted worker serves the certificates too', async () => {
    const root = await pebble.rootPem()
    await assert.rejects(request(`http://127.0.0.1:${httpPort}/crash`), /socket hang up|ECONNRESET/)
    await waitLog(a.lb, /"msg":"worker restarted"/)
    // both workers listen again: new connections spread over them (SO_REUSEPORT); each must verify
    for (let i = 0; i < 16; i++) assert.equal((await peer(a.lb.port, 'a.lb.test', root)).serial, issued.serial)
  })

  test('a router added by a reload gets its certificate, the others keep theirs', async () => {
    const root = await pebble.rootPem()
    a.lb.write(readFileSync(a.lb.file, 'utf8') + `
[routers.c]
rule = "Host(\`c.lb.test\`)"
entrypoints = ["websecure"]
service = "app"
[routers.c.tls]
cert_resolver = "pebble"
`)
    a.lb.reload()
    await waitLog(a.lb, /"msg":"certificate obtained","component":"acme","resolver":"pebble","domains":\["c\.lb\.test"\]/, 30_000)
    const c = await peer(a.lb.port, 'c.lb.test', root)
    assert.equal(c.names, 'DNS:c.lb.test')
    assert.equal((await peer(a.lb.port, 'a.lb.test', root)).serial, issued.serial)
    const list = (await json(`${a.dash}/api/certificates`)).json as Array<{ domains: string[], status: string }>
    assert.deepEqual(list.map((x) => [x.domains, x.status]), [[['a.lb.test', 'b.lb.test'], 'valid'], [['c.lb.test'], 'valid']])
  })
})

describe('renewal of a short-lived certificate (RSA 2048 key)', { timeout: 120_000, skip: NO_PEBBLE }, () => {
  let pebble: Pebble, lb: Lb
  before(async () => {
    const httpPort = await freePort() // pebble validates http-01 there: it must know the port before lb starts
    // 30 s certificates renewed 24 s before expiry: a renewal about 6 s after each issuance
    pebble = await planPebble({ httpPort, validitySec: 30 })
    await pebble.start()
    lb = (await startAdminLb(lbToml(certs, httpPort, backend.address, resolverToml(pebble, 'renew_before = "24s"\nkey_type = "RSA2048"')))).lb
  })
  after(async () => {
    await lb?.stop()
    await pebble?.stop()
  })

  test('a renewed certificate replaces the served one; a connection opened before keeps working', async () => {
    await waitLog(lb, /"msg":"certificate obtained"/, 30_000)
    const root = await pebble.rootPem()
    const first = await peer(lb.port, 'a.lb.test', root)
    const open = await keepAlive(lb.port, 'a.lb.test')
    assert.equal(open.socket.getPeerCertificate().serialNumber, first.serial)
    assert.equal(await open.get(), 'HTTP/1.1 200 OK')
    await waitLog(lb, /"msg":"certificate renewed"/, 60_000)
    assert.match(lb.log(), /"msg":"certificate renewed"/)
    // logged once every worker serves it: new handshakes get the new certificate
    const next = await peer(lb.port, 'a.lb.test', root)
    assert.notEqual(next.serial, first.serial)
    assert.equal(next.bits, 2048) // key_type = "RSA2048"
    assert.equal(next.names, 'DNS:a.lb.test, DNS:b.lb.test')
    // the connection opened on the old certificate is still there and still served
    assert.equal(await open.get(), 'HTTP/1.1 200 OK')
    assert.equal(open.socket.getPeerCertificate().serialNumber, first.serial)
    open.socket.end()
  })

  test('uWS negotiates no ALPN: a handshake offering acme-tls/1 on an entry point without tls_challenge gets no protocol', (t) => {
    if (requireTool(t, 'openssl', 'openssl') === null) return
    const out = sClient(lb.port, ['-servername', 'a.lb.test', '-alpn', 'acme-tls/1'])
    assert.match(out, /No ALPN negotiated/)
  })
})

describe('tls-alpn-01 issuance on the https entry point (terminated in node:tls)', { timeout: 120_000, skip: NO_PEBBLE }, () => {
  let pebble: Pebble, lb: Lb, tlsPort: number
  before(async () => {
    tlsPort = await freePort() // pebble validates tls-alpn-01 there: it must know the port before lb starts
    // pebble's http-01 port has no listener: only tls-alpn-01, on lb's https entry point, can validate
    pebble = await planPebble({ httpPort: await freePort(), tlsPort })
    await pebble.start()
    const resolver = resolverToml(pebble).replace('http_challenge]\nentrypoint = "web"', 'tls_challenge]\nentrypoint = "websecure"')
    lb = (await startAdminLb(lbToml(certs, 0, backend.address, resolver).replace('{{PORT}}', String(tlsPort)))).lb
  })
  after(async () => {
    await lb?.stop()
    await pebble?.stop()
  })

  test('pebble validates acme-tls/1 on lb\'s https entry point; the certificate chains to its root; ordinary HTTPS there still works', async () => {
    await waitLog(lb, /"msg":"certificate obtained"/, 30_000)
    const root = await pebble.rootPem()
    const got = await peer(tlsPort, 'a.lb.test', root) // verifies chain and name, or throws
    assert.match(got.issuer, /^Pebble Intermediate CA/)
    assert.equal(got.names, 'DNS:a.lb.test, DNS:b.lb.test')
    assert.equal((await peer(tlsPort, 'other.lb.test')).fingerprint, fingerprint(certs.server.cert))
    const conn = await keepAlive(tlsPort, 'a.lb.test')
    assert.equal(await conn.get(), 'HTTP/1.1 200 OK')
    assert.equal(await conn.get(), 'HTTP/1.1 200 OK')
    conn.socket.end()
  })

  test('with no challenge pending, a handshake offering acme-tls/1 gets the ordinary certificate and no protocol', async () => {
    const root = await pebble.rootPem()
    const alpn = await new Promise<string | false | null>((resolve, reject) => {
      const s = tls.connect({ host: '127.0.0.1', port: tlsPort, servername: 'a.lb.test', ca: root, ALPNProtocols: ['acme-tls/1'] }, () => {
        s.end()
        resolve(s.alpnProtocol)
      })
      s.on('error', reject)
    })
    assert.equal(alpn, false)
  })
})

describe('a full disk when the certificate comes', { timeout: 120_000, skip: NO_PEBBLE }, () => {
  test('the failure names the storage file and ENOSPC, no temp file is left; with space again it is installed without a new order', async (t) => {
    const disk = mountTmpfs(t, 256)
    if (disk === null) return
    const httpPort = await freePort()
    const pebble = await planPebble({ httpPort })
    await pebble.start()
    t.after(() => pebble.stop())
    fill(disk)
    const lb = await startLb(`[global]\nworkers = 2\naccess_log = "off"\nstate_dir = "${disk}"\n\n${lbToml(certs, httpPort, backend.address, resolverToml(pebble))}`)
    t.after(() => lb.stop())
    await lb.logMatching(/"code":"LB_ERR_ACME"/, 60_000)
    const storage = join(disk, 'acme-pebble.json').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    assert.match(lb.log(), new RegExp(`cannot obtain a certificate for a\\.lb\\.test, b\\.lb\\.test \\(cannot write ${storage} \\(ENOSPC, no space left on the device\\): the file is unchanged\\); retrying in 1s`))
    assert.deepEqual(readdirSync(disk, { recursive: true }).filter((f) => String(f).includes('.tmp-')), [], 'no temp file left')
    assert.equal((await peer(lb.port, 'a.lb.test')).fingerprint, fingerprint(certs.server.cert), 'the default certificate serves meanwhile')
    rmSync(join(disk, 'filler'))
    await lb.logMatching(/"msg":"certificate obtained"/, 60_000)
    assert.equal(lb.log().match(/"msg":"ordering certificate"/g)?.length, 1, 'ordered once: the certificate obtained before is the one installed')
    assert.match(lb.log(), /"msg":"writing the certificate obtained before"/)
    await peer(lb.port, 'a.lb.test', await pebble.rootPem()) // chains to pebble's root, or throws
    assert.equal(statSync(join(disk, 'acme-pebble.json')).mode & 0o777, 0o600)
  })
})

test('a damaged storage file is set aside (renamed .bad-<time>) and reported; lb serves the default certificate meanwhile', async (t) => {
  const dir = tempDir()
  writeFileSync(join(dir, 'acme-pebble.json'), '{"format": 1, "ca_server": ')
  const lb = await startLb(`[global]\nworkers = 2\naccess_log = "off"\nstate_dir = "${dir}"\n` +
    lbToml(certs, 0, backend.address, resolverToml({ directory: `https://127.0.0.1:${await freePort()}/dir`, caCertificate: certs.ca } as Pebble)))
  t.after(() => lb.stop())
  await waitLog(lb, /"code":"LB_ERR_ACME_STORAGE"/)
  assert.match(lb.log(), new RegExp(`certificate resolver pebble: storage file ${join(dir, 'acme-pebble.json')} is unusable: .*JSON.*; renamed to ${join(dir, 'acme-pebble.json')}\\.bad-\\d+`))
  assert.equal(readdirSync(dir).filter((f) => f.startsWith('acme-pebble.json.bad-')).length, 1)
  assert.equal((await peer(lb.port, 'a.lb.test')).fingerprint, fingerprint(certs.server.cert))
})

describe('lb check', () => {
  test('refuses a router whose cert_resolver names no resolver', () => {
    const r = check(lbToml(certs, 8080, '127.0.0.1:9', resolverToml({ directory: 'https://ca.example/dir', caCertificate: certs.ca } as Pebble), 'nope').replace('{{PORT}}', '8443'))
    assert.equal(r.status, 1)
    assert.match(r.out, /routers\.app\.tls\.cert_resolver: unknown certificate resolver "nope" \(defined: pebble\)/)
  })

  test('refuses tls_challenge on an entry point that cannot take it (not https, or mTLS), and two challenges or none', () => {
    const base = resolverToml({ directory: 'https://ca.example/dir', caCertificate: certs.ca } as Pebble)
    const tlsOn = (ep: string): string => base.replace('http_challenge]\nentrypoint = "web"', `tls_challenge]\nentrypoint = "${ep}"`)
    const run = (resolver: string): { status: number | null, out: string } => check(lbToml(certs, 8080, '127.0.0.1:9', resolver).replace('{{PORT}}', '8443'))
    let r = run(tlsOn('web'))
    assert.equal(r.status, 1)
    assert.match(r.out, /certificates_resolvers\.pebble\.acme\.tls_challenge\.entrypoint: expected an entry point with protocol = "https" \(defined: websecure\), found "web"/)
    r = check(lbToml(certs, 8080, '127.0.0.1:9', tlsOn('websecure')).replace('{{PORT}}', '8443').replace('[entrypoints.websecure.tls]\n', `[entrypoints.websecure.tls]\nca = "${certs.ca}"\n`))
    assert.equal(r.status, 1)
    assert.match(r.out, /certificates_resolvers\.pebble\.acme\.tls_challenge\.entrypoint: entry point websecure requires client certificates \(tls\.ca\), which the CA's validation server does not present/)
    r = run(base + '[certificates_resolvers.pebble.acme.tls_challenge]\nentrypoint = "websecure"\n')
    assert.equal(r.status, 1)
    assert.match(r.out, /certificates_resolvers\.pebble\.acme: expected one challenge, .* found both/)
    r = run(base.replace(/\[certificates_resolvers\.pebble\.acme\.http_challenge\]\nentrypoint = "web"\n/, ''))
    assert.equal(r.status, 1)
    assert.match(r.out, /certificates_resolvers\.pebble\.acme: expected one challenge, .* found none/)
    r = run(tlsOn('websecure'))
    assert.equal(r.out.includes('invalid'), false, r.out)
    assert.equal(r.status, 0)
  })

  test('refuses an http_challenge entry point that is not http, an unknown key type, a router on no https entry point', () => {
    const resolver = resolverToml({ directory: 'https://ca.example/dir', caCertificate: certs.ca } as Pebble, 'key_type = "EC521"').replace('entrypoint = "web"', 'entrypoint = "websecure"')
    const text = lbToml(certs, 8080, '127.0.0.1:9', resolver).replace('{{PORT}}', '8443').replace('entrypoints = ["websecure"]\nservice = "app"', 'entrypoints = ["web"]\nservice = "app"')
    const r = check(text)
    assert.equal(r.status, 1)
    assert.match(r.out, /certificates_resolvers\.pebble\.acme\.http_challenge\.entrypoint: expected an entry point with protocol = "http" \(defined: web\), found "websecure"/)
    assert.match(r.out, /certificates_resolvers\.pebble\.acme\.key_type: expected one of/)
    assert.match(r.out, /routers\.app\.tls: the router serves no https entry point/)
  })

  test('accepts a valid resolver', () => {
    const r = check(lbToml(certs, 8080, '127.0.0.1:9', resolverToml({ directory: 'https://ca.example/dir', caCertificate: certs.ca } as Pebble)).replace('{{PORT}}', '8443'))
    assert.equal(r.out.includes('invalid'), false, r.out)
    assert.equal(r.status, 0)
  })
})
