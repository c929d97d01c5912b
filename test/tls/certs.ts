// Throwaway certificates for the TLS tests, made with the openssl CLI
// (Debian's openssl package) into a temp folder: a CA, server certificates
// signed by it, a client certificate signed by it and one that is not.
// Plus two probes: a node:tls handshake and `openssl s_client`.
import { execFileSync, spawnSync } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import tls from 'node:tls'
import { migrateReq } from '../../core/net/listener-swap.js'
import { tempDir } from '../helpers.js'

export interface Pair { readonly cert: string, readonly key: string }

export interface Certs {
  readonly dir: string
  /** CA certificate (PEM file) that signs the server and client certificates */
  readonly ca: string
  /** localhost + 127.0.0.1 */
  readonly server: Pair
  /** other.test (SNI) */
  readonly other: Pair
  /** *.wild.test (SNI wildcard) */
  readonly wild: Pair
  /** a client certificate signed by the CA */
  readonly client: Pair
  /** a self-signed client certificate: not trusted */
  readonly stranger: Pair
}

function openssl (args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] })
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']

/** A key and a certificate for `cn` with these SANs, signed by the CA in `dir` (or self-signed). */
export function makePair (dir: string, name: string, cn: string, sans: string[], selfSigned = false): Pair {
  const cert = join(dir, `${name}.crt`)
  const key = join(dir, `${name}.key`)
  const ext = sans.length > 0 ? ['-addext', `subjectAltName=${sans.join(',')}`] : []
  if (selfSigned) {
    openssl(['req', '-x509', ...EC, '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=${cn}`, ...ext], dir)
  } else {
    const csr = join(dir, `${name}.csr`)
    openssl(['req', ...EC, '-keyout', key, '-out', csr, '-subj', `/CN=${cn}`], dir)
    const extFile = join(dir, `${name}.ext`)
    writeFileSync(extFile, sans.length > 0 ? `subjectAltName=${sans.join(',')}\n` : 'basicConstraints=CA:FALSE\n')
    openssl(['x509', '-req', '-in', csr, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', cert, '-days', '2', '-extfile', extFile], dir)
  }
  return { cert, key }
}

export function makeCerts (): Certs {
  const dir = tempDir('lb-certs-')
  openssl(['req', '-x509', ...EC, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=lb test CA'], dir)
  return {
    dir,
    ca: join(dir, 'ca.crt'),
    server: makePair(dir, 'server', 'localhost', ['DNS:localhost', 'IP:127.0.0.1']),
    other: makePair(dir, 'other', 'other.test', ['DNS:other.test']),
    wild: makePair(dir, 'wild', 'wild', ['DNS:*.wild.test']),
    client: makePair(dir, 'client', 'client', []),
    stranger: makePair(dir, 'stranger', 'stranger', [], true),
  }
}

/** SHA-256 fingerprint of a PEM certificate file, as tls.PeerCertificate.fingerprint256 prints it. */
export function fingerprint (certFile: string): string {
  return new X509Certificate(readFileSync(certFile)).fingerprint256
}

export interface Handshake { protocol: string, cipher: string, peer: string, authorized: boolean }

/**
 * One TLS handshake with node:tls; rejects with the TLS error (e.g. an alert
 * from the server). TLS 1.3 servers refuse a client certificate after the
 * client's handshake is done: `settleMs` is how long to wait for that.
 */
export function handshake (port: number, opts: tls.ConnectionOptions = {}, settleMs = 50): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...opts }, () => {
      setTimeout(() => {
        if (s.destroyed) return
        const r = { protocol: s.getProtocol() ?? '', cipher: s.getCipher().standardName, peer: s.getPeerCertificate().fingerprint256, authorized: s.authorized }
        s.end()
        resolve(r)
      }, settleMs)
    })
    s.on('error', reject)
    s.on('close', () => reject(new Error('closed by the server')))
  })
}

/** `openssl s_client` against 127.0.0.1:port with `args`; its whole output. */
export function sClient (port: number, args: string[]): string {
  const r = spawnSync('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, ...args], { input: '', timeout: 10_000, encoding: 'utf8' })
  return r.stdout + r.stderr
}

const MIGRATE_REQ = '/proc/sys/net/ipv4/tcp_migrate_req'

/**
 * Sets net.ipv4.tcp_migrate_req to 1 when this process may (root; the
 * setting is the network namespace's), as docs/tls-ws-tcp.md asks of hosts
 * that rotate certificates under load: without it Linux resets the
 * connections queued on a listener lb replaces (core/net/listener-swap.ts).
 * `on`: whether it is 1 now; `restore` puts back what was there.
 */
export function migrateRequests (): { on: boolean, restore: () => void } {
  const was = migrateReq()
  if (was === '1') return { on: true, restore: () => {} }
  if (was === '') return { on: false, restore: () => {} } // not Linux >= 5.14
  try {
    writeFileSync(MIGRATE_REQ, '1')
  } catch {
    return { on: false, restore: () => {} } // not root
  }
  return { on: true, restore: () => writeFileSync(MIGRATE_REQ, was) }
}
