// One TLS whatever serves an https entry point: uWS's BoringSSL (a plain https
// entry point), worker 0's node:tls terminator (mTLS, and http2 = true for a
// client that offers h2) and node:https (engine = "node"). Found apart by
// testssl and sslscan: node:tls kept the server's cipher order, accepted
// P-521, X448 and finite-field groups, and let a client renegotiate three
// times per connection, where BoringSSL does none of that.
import { strict as assert } from 'node:assert'
import { readFileSync, rmSync } from 'node:fs'
import tls from 'node:tls'
import { after, before, test } from 'node:test'
import { type Backend, type Lb, startBackend, startLb } from '../helpers.js'
import { type Certs, handshake, makeCerts } from './certs.js'

let certs: Certs
let backend: Backend
let lb: Lb
/** every kind of https entry point: its port, and what its client adds to a handshake */
const kinds: Array<{ name: string, port: number, opts: tls.ConnectionOptions }> = []

before(async () => {
  certs = makeCerts()
  backend = await startBackend('web')
  const table = (name: string, extra = ''): string => `[entrypoints.${name}]
address = "127.0.0.1:0"
protocol = "https"
${extra}
[entrypoints.${name}.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
`
  lb = await startLb(`
[global]
workers = 2
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
${table('uws')}
${table('h2', 'http2 = true')}
${table('node', 'engine = "node"')}
${table('mtls')}ca = "${certs.ca}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "${backend.address}"
check = false
`)
  const me = { cert: readFileSync(certs.client.cert), key: readFileSync(certs.client.key) }
  kinds.push(
    { name: 'uWS', port: await lb.portOf('uws'), opts: {} },
    { name: 'node:tls terminator (h2 offered)', port: await lb.portOf('h2'), opts: { ALPNProtocols: ['h2'] } },
    { name: 'node:tls terminator (mTLS)', port: await lb.portOf('mtls'), opts: me },
    { name: 'node:https (engine = "node")', port: await lb.portOf('node'), opts: {} }
  )
})

after(async () => {
  await lb?.stop()
  await backend?.close()
  rmSync(certs.dir, { recursive: true, force: true })
})

const TLS12 = { minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', servername: 'localhost' } as const

test('TLS 1.2: the client\'s cipher order decides, on every kind of https entry point', async () => {
  for (const k of kinds) {
    for (const [first, second] of [['ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-AES128-GCM-SHA256'], ['ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384']]) {
      const h = await handshake(k.port, { ...k.opts, ...TLS12, ciphers: `${first}:${second}` })
      assert.equal(h.cipher, `TLS_${first === 'ECDHE-ECDSA-AES256-GCM-SHA384' ? 'ECDHE_ECDSA_WITH_AES_256_GCM_SHA384' : 'ECDHE_ECDSA_WITH_AES_128_GCM_SHA256'}`, `${k.name}, client offers ${first} first`)
    }
  }
})

// TLS 1.3: in TLS 1.2 a client's groups also bound the curve of an ECDSA certificate (RFC 8422 §5.1.1), so a
// client without P-256 fails there whatever the server's groups
test('key exchange: X25519, P-256 and P-384 only, on every kind of https entry point', async () => {
  const v = { minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3', servername: 'localhost' } as const
  for (const k of kinds) {
    for (const group of ['X25519', 'P-256', 'P-384']) {
      const got = await handshake(k.port, { ...k.opts, ...v, ecdhCurve: group }).then((h) => h.protocol, (err: Error) => err.message)
      assert.equal(got, 'TLSv1.3', `${k.name}, ${group}`)
    }
    for (const group of ['P-521', 'X448']) {
      await assert.rejects(handshake(k.port, { ...k.opts, ...v, ecdhCurve: group }), /handshake failure|alert/, `${k.name}: ${group} refused`)
    }
  }
})

/** A TLS 1.2 connection that asks to renegotiate once it is up: the error it got, or '' when the server renegotiated. */
function renegotiate (port: number, opts: tls.ConnectionOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...opts, ...TLS12 }, () => {
      const ok = s.renegotiate({ rejectUnauthorized: false }, (err) => { s.destroy(); resolve(err === null ? '' : err.message) })
      if (!ok) { s.destroy(); resolve('renegotiate() refused at once') }
    })
    s.on('error', (err) => { resolve(err.message) })
    s.on('close', () => { resolve('closed by the server') })
    s.setTimeout(5000, () => { s.destroy(); reject(new Error('no answer to the renegotiation within 5 s')) })
  })
}

test('a client\'s renegotiation is refused on every kind of https entry point', async () => {
  for (const k of kinds) {
    const err = await renegotiate(k.port, k.opts)
    assert.notEqual(err, '', `${k.name}: renegotiated`)
    // the connection is still the client's first handshake's: refused, nothing renegotiated
    assert.match(err, /renegotiat|alert|closed/i, k.name)
  }
})

/** Whether `tries` new TLS 1.2 connections each resumed the session of a first one (tickets). */
async function resumes (port: number, opts: tls.ConnectionOptions, tries: number): Promise<number> {
  const connect = (session?: Buffer): Promise<{ session: Buffer | undefined, reused: boolean }> => new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...opts, ...TLS12, session }, () => {
      const r = { session: s.getSession(), reused: s.isSessionReused() }
      s.end()
      resolve(r)
    })
    s.on('error', reject)
  })
  const first = await connect()
  let reused = 0
  for (let i = 0; i < tries; i++) if ((await connect(first.session)).reused) reused++
  return reused
}

// uWS's apps each have their own ticket keys and take none (docs/tls-ws-tcp.md): about 1 in `workers` resumes there
test('a TLS session resumes whichever worker serves the next connection (node:tls: ticket keys shared by the workers)', async () => {
  for (const k of kinds.filter((x) => x.name !== 'uWS')) {
    assert.equal(await resumes(k.port, k.opts, 12), 12, k.name)
  }
})
