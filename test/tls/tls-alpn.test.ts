// The tls-alpn-01 answering of core/worker/tls/tls-alpn.ts while a challenge is
// pending, on real sockets with real node:tls peers: in lb a challenge is
// pending only for the moment the CA takes to validate (acme.test.ts covers
// the issuance against pebble), too short to aim ordinary clients at. The
// connection handling here is lb's own: a net.Server whose connections go
// through AlpnChallenges.accept to a tls.Server, as tls-terminator.ts does.
import { strict as assert } from 'node:assert'
import { X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import net from 'node:net'
import tls from 'node:tls'
import { after, before, test } from 'node:test'
import acme from 'acme-client'
import { ACME_TLS_1, AlpnChallenges } from '../../core/worker/tls/tls-alpn.js'
import { type Certs, fingerprint, makeCerts } from './certs.js'

let certs: Certs
let server: net.Server
let port: number
let challenge: { cert: string, key: string }
const alpn = new AlpnChallenges('websecure')

before(async () => {
  certs = makeCerts()
  const key = await acme.crypto.createPrivateEcdsaKey('P-256')
  const authz = { identifier: { type: 'dns', value: 'a.lb.test' } } as unknown as acme.Authorization
  const [, cert] = await acme.crypto.createAlpnCertificate(authz, 'token.thumbprint', key)
  challenge = { cert: cert.toString(), key: key.toString() }
  // an echo behind TLS stands for the relay to uWS
  const secure = tls.createServer({ cert: readFileSync(certs.server.cert), key: readFileSync(certs.server.key) }, (s) => s.pipe(s))
  server = net.createServer((sock) => alpn.accept(sock, (s) => secure.emit('connection', s), 5000))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as net.AddressInfo).port
})
after(() => server.close())

interface Seen { fingerprint: string, alpn: string | false | null, echo: string, closed: boolean }

/** A handshake (SNI a.lb.test unless given), then "ping" sent; what came back before the server closed or 300 ms passed. */
function probe (o: tls.ConnectionOptions): Promise<Seen> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, servername: 'a.lb.test', rejectUnauthorized: false, ...o }, () => {
      let echo = ''
      const fp = new X509Certificate(s.getPeerCertificate(true).raw).fingerprint256
      const done = (closed: boolean): void => {
        clearTimeout(timer)
        s.destroy()
        resolve({ fingerprint: fp, alpn: s.alpnProtocol, echo, closed })
      }
      // every case ends early (the echo, or the close); this only bounds one that does not
      const timer = setTimeout(() => done(false), 2000)
      s.setEncoding('utf8')
      s.on('data', (d: string) => { echo += d; if (echo === 'ping') done(false) })
      s.once('end', () => done(true))
      s.write('ping')
    })
    s.on('error', reject)
  })
}

const challengeFp = (): string => new X509Certificate(challenge.cert).fingerprint256

test('no challenge pending: every handshake reaches the TLS server, acme-tls/1 offered or not', async () => {
  alpn.set({})
  const seen = await probe({ ALPNProtocols: [ACME_TLS_1] })
  assert.deepEqual(seen, { fingerprint: fingerprint(certs.server.cert), alpn: false, echo: 'ping', closed: false })
})

test('a challenge pending: acme-tls/1 for its name gets the challenge certificate and protocol, then the connection ends', async () => {
  alpn.set({ 'a.lb.test': { entrypoint: 'websecure', ...challenge }, 'x.lb.test': { entrypoint: 'other', ...challenge } })
  const seen = await probe({ ALPNProtocols: [ACME_TLS_1] })
  assert.equal(seen.fingerprint, challengeFp())
  assert.equal(seen.alpn, ACME_TLS_1)
  assert.equal(seen.echo, '')
  assert.equal(seen.closed, true)
})

test('a challenge pending: other handshakes are served as before, their bytes intact', async () => {
  const ordinary = { fingerprint: fingerprint(certs.server.cert), alpn: false, echo: 'ping', closed: false }
  // same name without acme-tls/1, with other protocols, or none at all
  assert.deepEqual(await probe({}), ordinary)
  assert.deepEqual(await probe({ ALPNProtocols: ['h2', 'http/1.1'] }), ordinary)
  // acme-tls/1 for a name without a challenge, or one pending on another entry point, or no SNI
  assert.deepEqual(await probe({ ALPNProtocols: [ACME_TLS_1], servername: 'b.lb.test' }), ordinary)
  assert.deepEqual(await probe({ ALPNProtocols: [ACME_TLS_1], servername: 'x.lb.test' }), ordinary)
  assert.deepEqual(await probe({ ALPNProtocols: [ACME_TLS_1], servername: '' }), ordinary)
})

test('a challenge pending: a connection that sends no ClientHello is closed after the handshake timeout; garbage goes on to TLS', async () => {
  const quiet = net.connect({ host: '127.0.0.1', port })
  const closed = await new Promise<number>((resolve) => {
    const t0 = Date.now()
    quiet.on('close', () => resolve(Date.now() - t0))
    quiet.on('error', () => {})
  })
  assert.ok(closed >= 4500, `closed after ${closed} ms`)
  const junk = net.connect({ host: '127.0.0.1', port }, () => junk.write('GET / HTTP/1.1\r\n\r\n'))
  junk.on('error', () => {})
  await new Promise<void>((resolve) => junk.on('close', () => resolve())) // refused by the TLS server, not left hanging
})
