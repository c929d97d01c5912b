// Validation of the TLS, TCP and WebSocket keys: every mistake is reported with
// its key path; certificate files are read and checked (key matches
// certificate) so `lb check` catches them. And the shipped HTTPS example,
// with certificates from conf/make-cert.sh, passes `lb check`.
import { strict as assert } from 'node:assert'
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, test } from 'node:test'
import { parseConfig } from '../../core/configure.js'
import { CLI, ROOT, tempDir } from '../helpers.js'
import { type Certs, makeCerts } from './certs.js'

let certs: Certs
before(() => { certs = makeCerts() })

const SERVICE = `
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "127.0.0.1:9001"
`

/** The problems parseConfig reports for `toml`, or '' when it is valid. */
function problems (toml: string): string {
  try {
    parseConfig(toml + SERVICE, '/etc/lb/t.toml')
    return ''
  } catch (err) {
    return (err as Error).message
  }
}

function https (tls: string, extra = ''): string {
  return `[entrypoints.s]\naddress = "127.0.0.1:8443"\nprotocol = "https"\n${extra}\n[entrypoints.s.tls]\n${tls}\n`
}

test('a valid https entry point: absolute paths, default ciphers, SNI hosts from the certificate', () => {
  const c = parseConfig(https(`cert = "${certs.server.cert}"\nkey = "${certs.server.key}"\nca = "${certs.ca}"\n` +
    `[[entrypoints.s.tls.sni]]\ncert = "${certs.wild.cert}"\nkey = "${certs.wild.key}"`) + SERVICE, '/etc/lb/t.toml')
  const ep = c.entrypoints[0]!
  assert.equal(ep.protocol, 'https')
  assert.equal(ep.tls!.ca, certs.ca)
  assert.match(ep.tls!.ciphers, /^ECDHE-ECDSA-AES128-GCM-SHA256:/)
  assert.deepEqual(ep.tls!.sni[0]!.hosts, ['*.wild.test'])
  assert.equal(ep.wsMaxMessage, 16 * 1024 * 1024)
  assert.equal(c.timeouts.tunnelMs, 50_000)
})

test('https: tls is required; files must exist, be PEM, and the key must match the certificate', () => {
  assert.match(problems('[entrypoints.s]\naddress = "127.0.0.1:8443"\nprotocol = "https"'), /entrypoints\.s\.tls: expected a table with cert and key \(required for protocol = "https"\), found nothing/)
  assert.match(problems(https(`key = "${certs.server.key}"`)), /entrypoints\.s\.tls\.cert: expected a string \(required\), found nothing/)
  assert.match(problems(https(`cert = "${certs.dir}/nope.crt"\nkey = "${certs.server.key}"`)), /entrypoints\.s\.tls\.cert: cannot read .*nope\.crt: ENOENT/)
  assert.match(problems(https(`cert = "${certs.server.key}"\nkey = "${certs.server.key}"`)), /entrypoints\.s\.tls/)
  assert.match(problems(https(`cert = "${certs.server.cert}"\nkey = "${certs.other.key}"`)), /entrypoints\.s\.tls: .*key values mismatch/)
  assert.match(problems(https(`cert = "${certs.server.cert}"\nkey = "${certs.server.key}"\nca = "${certs.dir}/server.csr"`)), /entrypoints\.s\.tls\.ca: /)
  assert.match(problems(https(`cert = "${certs.server.cert}"\nkey = "${certs.server.key}"\nclient_ca = "x"`)), /entrypoints\.s\.tls\.client_ca: unknown key \(allowed: cert, key, ca, ciphers, sni\)/)
})

test('ciphers: TLS 1.2 names OpenSSL knows; TLS 1.3 suite names are refused (not configurable)', () => {
  const pair = `cert = "${certs.server.cert}"\nkey = "${certs.server.key}"\n`
  assert.equal(problems(https(pair + 'ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256"')), '')
  assert.match(problems(https(pair + 'ciphers = "NOT-A-CIPHER"')), /entrypoints\.s\.tls\.ciphers: .*no cipher match/)
  assert.match(problems(https(pair + 'ciphers = "TLS_AES_128_GCM_SHA256"')), /entrypoints\.s\.tls\.ciphers: expected TLS 1\.2 cipher names only/)
})

test('SNI entries: hosts checked and unique', () => {
  const pair = `cert = "${certs.server.cert}"\nkey = "${certs.server.key}"\n`
  const sni = (hosts: string): string => `[[entrypoints.s.tls.sni]]\ncert = "${certs.other.cert}"\nkey = "${certs.other.key}"\n${hosts}\n`
  assert.match(problems(https(pair + sni('hosts = ["bad host"]'))), /entrypoints\.s\.tls\.sni\[0\]\.hosts: expected host names like "api\.example\.com" or "\*\.example\.com", found "bad host"/)
  assert.match(problems(https(pair + sni('') + sni('hosts = ["other.test"]'))), /entrypoints\.s\.tls\.sni\[1\]\.hosts: other\.test already has a certificate/)
})

test('keys that belong to other protocols are refused', () => {
  const pair = `[entrypoints.p.tls]\ncert = "${certs.server.cert}"\nkey = "${certs.server.key}"\n`
  assert.match(problems(`[entrypoints.p]\naddress = "127.0.0.1:8080"\n${pair}`), /entrypoints\.p\.tls: only for protocol = "https" \(this entry point is "http"\)/)
  assert.match(problems('[entrypoints.p]\naddress = "127.0.0.1:8080"\nservice = "web"'), /entrypoints\.p\.service: only for protocol = "tcp"/)
  assert.match(problems('[entrypoints.t]\naddress = "127.0.0.1:9000"\nprotocol = "tcp"\nservice = "web"\nwebsocket_max_message = "1M"'), /entrypoints\.t\.websocket_max_message: only for protocol = "http" or "https"/)
  assert.match(problems('[entrypoints.p]\naddress = "127.0.0.1:8080"\nprotocol = "quic"'), /entrypoints\.p\.protocol: expected one of "http", "https", "tcp", "h2c", found "quic"/)
  assert.match(problems('[entrypoints.p]\naddress = "127.0.0.1:8080"\nwebsocket_max_message = "2G"'), /entrypoints\.p\.websocket_max_message: expected a size from 1 byte to "1G"/)
})

test('tcp: service required, defined and of kind proxy; routers cannot use a tcp entry point', () => {
  assert.match(problems('[entrypoints.t]\naddress = "127.0.0.1:9000"\nprotocol = "tcp"'), /entrypoints\.t\.service: expected a string \(required\), found nothing/)
  assert.match(problems('[entrypoints.t]\naddress = "127.0.0.1:9000"\nprotocol = "tcp"\nservice = "nope"'), /entrypoints\.t\.service: unknown service "nope"/)
  assert.match(problems('[entrypoints.t]\naddress = "127.0.0.1:9000"\nprotocol = "tcp"\nservice = "st"\n[services.st]\nkind = "status"'),
    /entrypoints\.t\.service: service "st" is of kind "status"; a tcp entry point needs a "proxy" service/)
  const routed = '[entrypoints.web]\naddress = "127.0.0.1:8080"\n[entrypoints.t]\naddress = "127.0.0.1:9000"\nprotocol = "tcp"\nservice = "web"\n' +
    '[routers.x]\nrule = "PathPrefix(`/x`)"\nentrypoints = ["t"]\nservice = "web"\n'
  assert.match(problems(routed), /routers\.x\.entrypoints: unknown entry point "t" \(defined: web\)/)
})

test('timeouts.tunnel and health_check.type', () => {
  assert.match(problems('[entrypoints.p]\naddress = "127.0.0.1:8080"\n[timeouts]\ntunnel = "10ms"'), /timeouts\.tunnel: expected a duration like "5s" or "250ms" of at least 100ms, found "10ms"/)
  assert.match(problems('[entrypoints.p]\naddress = "127.0.0.1:8080"\n[services.x.health_check]\ntype = "udp"'), /services\.x\.health_check\.type: expected one of "http", "tcp", "grpc", found "udp"/)
})

test('conf/https.toml with certificates from conf/make-cert.sh passes `lb check`', () => {
  const dir = tempDir('lb-https-')
  copyFileSync(join(ROOT, 'conf', 'https.toml'), join(dir, 'https.toml'))
  execFileSync('bash', [join(ROOT, 'conf', 'make-cert.sh'), join(dir, 'certs')], { stdio: 'ignore' })
  const r = spawnSync(process.execPath, [CLI, 'check', '-c', join(dir, 'https.toml')], { encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  // without the certificates it says which file is missing
  const bare = tempDir('lb-https-')
  copyFileSync(join(ROOT, 'conf', 'https.toml'), join(bare, 'https.toml'))
  const r2 = spawnSync(process.execPath, [CLI, 'check', '-c', join(bare, 'https.toml')], { encoding: 'utf8' })
  assert.equal(r2.status, 1)
  assert.match(r2.stderr, /entrypoints\.websecure\.tls\.cert: cannot read .*certs\/lb\.crt: ENOENT/)
})
