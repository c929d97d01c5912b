// HTTPS and mTLS entry points through the real balancer (2 workers), checked
// with Debian's `openssl s_client` and node:tls: protocol versions, the seed's
// TLS 1.3 suites, configurable TLS 1.2 ciphers, client certificates, SNI, the
// HTTP → HTTPS redirect, and certificates re-read on SIGHUP without dropping
// connections. Certificates are made per run (test/tls/certs.ts).
import { strict as assert } from 'node:assert'
import { copyFileSync, readFileSync, renameSync } from 'node:fs'
import https from 'node:https'
import net from 'node:net'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, freePort, request, startBackend, startLb, waitFor } from '../helpers.js'
import { migrateReq } from '../../core/net/listener-swap.js'
import { type Certs, fingerprint, handshake, makeCerts, makePair, migrateRequests, sClient } from './certs.js'
import { connect, nextMessage, startWsEcho } from '../ws/echo.js'

interface Got { status: number, headers: Record<string, string | string[] | undefined>, body: string, localPort: number }

function get (port: number, path: string, opts: https.RequestOptions = {}): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path, servername: 'localhost', agent: false, ...opts }, (res) => {
      const localPort = res.socket.localPort ?? 0
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => { body += d })
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, localPort }))
    })
    req.on('error', reject)
    req.end()
  })
}

const echoHeaders: Parameters<typeof startBackend>[1] = (req, res, name) => {
  req.resume()
  req.on('end', () => {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ name, url: req.url, headers: req.headers }))
  })
}

function tlsTable (name: string, cert: string, key: string, extra = ''): string {
  return `[entrypoints.${name}.tls]\ncert = "${cert}"\nkey = "${key}"\n${extra}\n`
}

function routes (backend: string): string {
  return `[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "${backend}"
check = false
`
}

let certs: Certs
before(() => { certs = makeCerts() })

describe('https entry point (uWS)', () => {
  let backend: Backend, lb: Lb, narrow: number
  before(async () => {
    backend = await startBackend('web', echoHeaders)
    lb = await startLb(`
[entrypoints.websecure]
address = "127.0.0.1:{{PORT}}"
protocol = "https"
${tlsTable('websecure', certs.server.cert, certs.server.key)}
[[entrypoints.websecure.tls.sni]]
cert = "${certs.other.cert}"
key = "${certs.other.key}"
[[entrypoints.websecure.tls.sni]]
cert = "${certs.wild.cert}"
key = "${certs.wild.key}"

[entrypoints.narrow]
address = "127.0.0.1:0"
protocol = "https"
${tlsTable('narrow', certs.server.cert, certs.server.key, 'ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256"')}
${routes(backend.address)}`)
    narrow = await lb.portOf('narrow')
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('TLS 1.0 and 1.1 handshakes are refused, 1.2 and 1.3 accepted (openssl s_client)', () => {
    for (const v of ['-tls1', '-tls1_1']) {
      // SECLEVEL=0 so that the client really offers the old version: the refusal must come from the server
      assert.match(sClient(lb.port, [v, '-cipher', 'DEFAULT@SECLEVEL=0']), /alert protocol version/, v)
    }
    assert.match(sClient(lb.port, ['-tls1_2']), /New, TLSv1\.2, Cipher is ECDHE-ECDSA-AES/)
    assert.match(sClient(lb.port, ['-tls1_3']), /New, TLSv1\.3, Cipher is TLS_AES_/)
  })

  test('the seed\'s TLS 1.3 suites are offered; BoringSSL also offers CHACHA20 (documented limit)', () => {
    for (const suite of ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384']) {
      assert.match(sClient(lb.port, ['-tls1_3', '-ciphersuites', suite]), new RegExp(`New, TLSv1\\.3, Cipher is ${suite}`))
    }
    // uWS's BoringSSL cannot restrict TLS 1.3 suites (docs/tls-ws-tcp.md); the mTLS path can (below)
    assert.match(sClient(lb.port, ['-tls1_3', '-ciphersuites', 'TLS_CHACHA20_POLY1305_SHA256']), /Cipher is TLS_CHACHA20_POLY1305_SHA256/)
  })

  test('TLS 1.2 ciphers are configurable', async () => {
    assert.match(sClient(narrow, ['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES128-GCM-SHA256']), /Cipher is ECDHE-ECDSA-AES128-GCM-SHA256/)
    assert.match(sClient(narrow, ['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES256-GCM-SHA384']), /alert handshake failure/)
    // the default list takes it
    assert.match(sClient(lb.port, ['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES256-GCM-SHA384']), /Cipher is ECDHE-ECDSA-AES256-GCM-SHA384/)
    // node:tls agrees
    await assert.rejects(handshake(narrow, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES256-GCM-SHA384' }), /handshake failure/)
    await assert.rejects(handshake(lb.port, { minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' }), /protocol version/)
  })

  test('lb warns at start when a certificate change would reset queued connections (net.ipv4.tcp_migrate_req not 1)', () => {
    const warning = /"level":"warn".*tcp_migrate_req is not 1.*"entrypoints":\["websecure","narrow"\]/
    if (migrateReq() === '1') assert.doesNotMatch(lb.log(), /tcp_migrate_req/)
    else assert.match(lb.log(), warning)
  })

  test('SNI picks the certificate: exact name, wildcard, default for others and for no name', async () => {
    assert.equal((await handshake(lb.port, { servername: 'other.test' })).peer, fingerprint(certs.other.cert))
    assert.equal((await handshake(lb.port, { servername: 'a.wild.test' })).peer, fingerprint(certs.wild.cert))
    assert.equal((await handshake(lb.port, { servername: 'localhost' })).peer, fingerprint(certs.server.cert))
    assert.equal((await handshake(lb.port, { servername: 'b.a.wild.test' })).peer, fingerprint(certs.server.cert))
    assert.equal((await handshake(lb.port, {})).peer, fingerprint(certs.server.cert))
  })

  test('requests on a connection whose SNI chose a tls.sni certificate are routed (uWS routes those by the name\'s own router)', async () => {
    for (const servername of ['other.test', 'a.wild.test']) {
      const r = await get(lb.port, '/sni', { servername, headers: { host: servername }, ca: readPem(certs.ca) })
      assert.equal(r.status, 200, servername)
      assert.equal(JSON.parse(r.body).url, '/sni')
    }
  })

  test('requests are proxied with X-Forwarded-Proto https; the certificate verifies against the CA', async () => {
    const r = await get(lb.port, '/x?y=1', { ca: readPem(certs.ca) })
    assert.equal(r.status, 200)
    const seen = JSON.parse(r.body) as { url: string, headers: Record<string, string> }
    assert.equal(seen.url, '/x?y=1')
    assert.equal(seen.headers['x-forwarded-proto'], 'https')
    assert.equal(seen.headers['x-real-ip'], '127.0.0.1')
  })
})

describe('mTLS entry point (node:tls terminator in front of the workers)', () => {
  let backend: Backend, lb: Lb
  before(async () => {
    backend = await startBackend('web', echoHeaders)
    lb = await startLb(`
[timeouts]
client = "2s"
[entrypoints.mtls]
address = "127.0.0.1:{{PORT}}"
protocol = "https"
${tlsTable('mtls', certs.server.cert, certs.server.key, `ca = "${certs.ca}"`)}
[[entrypoints.mtls.tls.sni]]
cert = "${certs.other.cert}"
key = "${certs.other.key}"
${routes(backend.address)}`)
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('no client certificate and an untrusted one are refused at the handshake; a trusted one is served', async () => {
    // openssl: TLS 1.3 reports the refusal as an alert after its handshake messages, TLS 1.2 during it
    assert.match(sClient(lb.port, ['-tls1_3', '-ign_eof']), /alert certificate required/)
    assert.match(sClient(lb.port, ['-tls1_2']), /alert handshake failure/)
    await assert.rejects(handshake(lb.port, {}, 2000), /certificate required/)
    // an untrusted certificate: node:tls checks it once OpenSSL's handshake is done and closes the
    // connection at once, before a byte of the request is read (without an alert: docs/tls-ws-tcp.md)
    assert.match(sClient(lb.port, ['-ign_eof', '-cert', certs.stranger.cert, '-key', certs.stranger.key]), /unexpected eof/)
    await assert.rejects(get(lb.port, '/stranger', { ca: readPem(certs.ca), cert: readPem(certs.stranger.cert), key: readPem(certs.stranger.key) }),
      /socket hang up|ECONNRESET/)
    await assert.rejects(get(lb.port, '/nobody', { ca: readPem(certs.ca) }), /certificate required|socket hang up|ECONNRESET/)
    const ok = await get(lb.port, '/who', { ca: readPem(certs.ca), cert: readPem(certs.client.cert), key: readPem(certs.client.key) })
    assert.equal(ok.status, 200)
    const seen = JSON.parse(ok.body) as { headers: Record<string, string> }
    assert.equal(seen.headers['x-forwarded-proto'], 'https')
    // the client's address crossed the internal hop in the PROXY v2 header
    assert.equal(seen.headers['x-real-ip'], '127.0.0.1')
    assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1')
    assert.deepEqual(backend.requests.map((r) => r.url), ['/who'], 'only the request with a trusted certificate reached the backend')
  })

  test('a client that sends nothing, or half a ClientHello, is closed at the handshake time-out (timeouts.client, 2 s here)', async () => {
    const closedAfter = (first: Buffer | null): Promise<number> => new Promise((resolve) => {
      const t0 = Date.now()
      const s = net.connect(lb.port, '127.0.0.1', () => { if (first !== null) s.write(first) })
      s.on('error', () => {})
      s.on('close', () => resolve(Date.now() - t0))
      s.setTimeout(15_000, () => { s.destroy(); resolve(-1) }) // the bound of this test, far past the 2 s handshake time-out
    })
    const [silent, half] = await Promise.all([closedAfter(null), closedAfter(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]))])
    for (const [what, ms] of [['silent', silent], ['half a record', half]] as const) {
      assert.ok(ms >= 1_500 && ms < 8_000, `${what}: closed after ${ms} ms (-1: still open after 15 s)`)
    }
  })

  test('TLS 1.0/1.1 refused; TLS 1.3 limited to the seed\'s two suites; SNI picks the certificate', async () => {
    const me = ['-cert', certs.client.cert, '-key', certs.client.key]
    assert.match(sClient(lb.port, ['-tls1_1', '-cipher', 'DEFAULT@SECLEVEL=0', ...me]), /alert protocol version/)
    assert.match(sClient(lb.port, ['-tls1_2', ...me]), /New, TLSv1\.2/)
    for (const suite of ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384']) {
      assert.match(sClient(lb.port, ['-tls1_3', '-ciphersuites', suite, ...me]), new RegExp(`New, TLSv1\\.3, Cipher is ${suite}`))
    }
    assert.match(sClient(lb.port, ['-tls1_3', '-ciphersuites', 'TLS_CHACHA20_POLY1305_SHA256', ...me]), /alert handshake failure/)
    const client = { cert: readPem(certs.client.cert), key: readPem(certs.client.key) }
    assert.equal((await handshake(lb.port, { ...client, servername: 'other.test' })).peer, fingerprint(certs.other.cert))
    assert.equal((await handshake(lb.port, { ...client, servername: 'localhost' })).peer, fingerprint(certs.server.cert))
  })
})

function readPem (file: string): Buffer {
  return readFileSync(file)
}

/** `p`, its error (if any) prefixed with which step it was: a connection-level error alone does not say. */
async function step<T> (what: string, p: Promise<T>): Promise<T> {
  try {
    return await p
  } catch (err) {
    throw new Error(`${what}: ${(err as Error).message}`, { cause: err })
  }
}

describe('certificates re-read on SIGHUP', () => {
  let backend: Backend, echo: Awaited<ReturnType<typeof startWsEcho>>, lb: Lb, mtls: number, h2s: number, live: { cert: string, key: string }
  let migrate: ReturnType<typeof migrateRequests>
  before(async () => {
    migrate = migrateRequests() // what docs/tls-ws-tcp.md asks of a host; without it, see the test
    backend = await startBackend('web', echoHeaders)
    echo = await startWsEcho('ws')
    // the files the config names; the test swaps their contents
    live = { cert: join(certs.dir, 'live.crt'), key: join(certs.dir, 'live.key') }
    copyFileSync(certs.server.cert, live.cert)
    copyFileSync(certs.server.key, live.key)
    lb = await startLb(`
[entrypoints.websecure]
address = "127.0.0.1:{{PORT}}"
protocol = "https"
${tlsTable('websecure', live.cert, live.key)}
[entrypoints.mtls]
address = "127.0.0.1:0"
protocol = "https"
${tlsTable('mtls', live.cert, live.key, `ca = "${certs.ca}"`)}
[entrypoints.h2s]
address = "127.0.0.1:0"
protocol = "https"
http2 = true
${tlsTable('h2s', live.cert, live.key)}
[routers.ws]
rule = "PathPrefix(\`/ws\`)"
service = "ws"
[services.ws]
[[services.ws.servers]]
address = "${echo.address}"
check = false
${routes(backend.address)}`)
    mtls = await lb.portOf('mtls')
    h2s = await lb.portOf('h2s')
  })
  after(async () => { await lb.stop(); await backend.close(); await echo.close(); migrate.restore() })

  test('new connections get the new certificate; keep-alive connections and WebSockets stay up; no handshake fails', async (t) => {
    const client = { cert: readPem(certs.client.cert), key: readPem(certs.client.key) }
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: readPem(certs.ca), servername: 'localhost' })
    t.after(() => agent.destroy()) // also when an assertion fails: an open keep-alive socket would hold the file until its time-out
    const before1 = await step('the first request', get(lb.port, '/a', { agent, ca: readPem(certs.ca) }))
    const ws = await step('the WebSocket upgrade', connect(`wss://localhost:${lb.port}/ws`, { ca: readPem(certs.ca) }))
    t.after(() => ws.terminate())
    const old = fingerprint(certs.server.cert)
    assert.equal((await step('the first handshake', handshake(lb.port))).peer, old)

    // new handshakes keep coming while the certificate changes; so do the probes below
    let stop = false
    const failures: string[] = []
    let handshakes = 0
    const tried = async (port: number, opts?: Parameters<typeof handshake>[1]): Promise<string | null> => {
      try {
        const h = await handshake(port, opts)
        handshakes++
        return h.peer
      } catch (err) {
        failures.push((err as Error).message)
        return null
      }
    }
    const load = (async () => { while (!stop) await tried(lb.port) })()
    t.after(() => { stop = true }) // also when an assertion fails: a loop left running kept the file from ending (cancelled at the time-out)

    const next = makePair(certs.dir, 'next', 'localhost', ['DNS:localhost', 'IP:127.0.0.1'])
    // atomic replacement, key first: the same way certbot's symlink swap looks to a reader
    copyFileSync(next.key, live.key + '.tmp')
    renameSync(live.key + '.tmp', live.key)
    copyFileSync(next.cert, live.cert + '.tmp')
    renameSync(live.cert + '.tmp', live.cert)
    lb.reload()
    const want = fingerprint(next.cert)
    await waitFor(async () => (await tried(lb.port)) === want, 'the https entry point to serve the new certificate', 6000)
    await waitFor(async () => (await tried(mtls, client)) === want, 'the mTLS entry point to serve the new certificate', 6000)
    // each worker swaps its listener on its own: wait until both have (one handshake above may have met either);
    // on the h2 entry point the terminator and both workers' apps for the clients it hands on
    const reloaded = (ep: string): number => (lb.log().match(new RegExp(`TLS certificates reloaded[^\\n]*"entrypoint":"${ep}"`, 'g')) ?? []).length
    await waitFor(() => reloaded('websecure') >= 2 && reloaded('mtls') >= 1 && reloaded('h2s') >= 2, 'both workers and the terminator to log the swap', 6000)
    // h2 entry point: a client offering h2 (node:tls in worker 0) and, on both workers' apps, ones that offer only http/1.1
    assert.equal((await handshake(h2s, { ALPNProtocols: ['h2'] })).peer, want)
    for (let i = 0; i < 4; i++) assert.equal((await handshake(h2s, { ALPNProtocols: ['http/1.1'] })).peer, want)
    // and handshakes go on after the swap
    const swapped = handshakes + failures.length
    await waitFor(() => handshakes + failures.length >= swapped + 10, '10 more handshakes after the swap', 5000, 10)
    stop = true
    await load

    assert.equal((await handshake(lb.port)).peer, want, 'https entry point serves the new certificate')
    assert.equal((await handshake(mtls, client)).peer, want, 'mTLS entry point serves the new certificate')
    if (migrate.on) {
      assert.deepEqual(failures, [], `${handshakes} handshakes during the swap`)
      assert.doesNotMatch(lb.log(), /tcp_migrate_req/)
    } else {
      // not root: Linux resets what queued on the replaced listener (core/net/listener-swap.ts); nothing else may fail
      for (const f of failures) assert.match(f, /ECONNRESET|disconnected before secure TLS connection/, `${handshakes} handshakes during the swap`)
      t.diagnostic(`net.ipv4.tcp_migrate_req is not 1 and cannot be set here: ${failures.length} of ${handshakes + failures.length} handshakes reset`)
    }
    assert.ok(handshakes > 5, `${handshakes} handshakes during the swap`)
    // the keep-alive connection made before the swap is still the one in use
    const after1 = await get(lb.port, '/b', { agent, ca: readPem(certs.ca) })
    assert.equal(after1.status, 200)
    assert.equal(after1.localPort, before1.localPort, 'same client connection as before the reload')
    // and the WebSocket opened before it still relays
    ws.send('still here')
    assert.equal((await nextMessage(ws)).data.toString(), 'still here')
    for (const re of [/TLS certificates reloaded.*websecure/, /TLS certificates reloaded.*mtls/]) assert.match(await lb.logMatching(re), re)
  })

  test('a reload with unusable certificate files is rejected; the running certificates stay', async () => {
    const served = (await handshake(lb.port)).peer
    copyFileSync(certs.other.key, live.key) // no longer matches live.crt
    lb.reload()
    await lb.logMatching(/reload rejected/)
    assert.match(lb.log(), /reload rejected.*entrypoints\.websecure\.tls: .*(mismatch|does not match)/)
    assert.equal((await handshake(lb.port)).peer, served)
    assert.equal((await get(lb.port, '/c', { ca: readPem(certs.ca) })).status, 200)
  })
})

describe('HTTP → HTTPS with the redirectScheme middleware', () => {
  let backend: Backend, lb: Lb, secure: number
  before(async () => {
    backend = await startBackend('web', echoHeaders)
    // a port of our choosing, not 0: the redirect middleware in the same file names it
    secure = await freePort()
    lb = await startLb(`
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.websecure]
address = "127.0.0.1:${secure}"
protocol = "https"
${tlsTable('websecure', certs.server.cert, certs.server.key)}
[middlewares.to-https]
type = "redirectScheme"
scheme = "https"
port = ${secure}
permanent = true
[routers.redirect]
rule = "PathPrefix(\`/\`)"
entrypoints = ["web"]
middlewares = ["to-https"]
service = "web"
[routers.web]
rule = "PathPrefix(\`/\`)"
entrypoints = ["websecure"]
service = "web"
[services.web]
[[services.web.servers]]
address = "${backend.address}"
check = false
`)
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('the plain entry point answers 301 (308 for POST) to the same URL on https, which serves it', async () => {
    const r = await request(`${lb.url}/a/b?c=1`, { headers: { host: 'localhost' } })
    assert.equal(r.status, 301)
    assert.equal(r.headers.location, `https://localhost:${secure}/a/b?c=1`)
    assert.equal((await request(`${lb.url}/form`, { method: 'POST', headers: { host: 'localhost' } })).status, 308)
    assert.equal(backend.requests.length, 0, 'nothing reached the backend over plain HTTP')
    const loc = new URL(r.headers.location!)
    const s = await get(Number(loc.port), loc.pathname + loc.search, { ca: readPem(certs.ca) })
    assert.equal(s.status, 200)
    assert.equal((JSON.parse(s.body) as { url: string }).url, '/a/b?c=1')
  })
})
