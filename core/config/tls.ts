// TLS settings of an https entry point ([entrypoints.X.tls]): the default
// certificate and key, per-host certificates chosen by SNI, the CA file that
// turns on mTLS, and the TLS 1.2 cipher list. The files are read here to
// validate them (so `lb check` reports a key that does not match its
// certificate), and read again by the workers on every config generation
// (core/worker/listeners.ts compares tlsFingerprint), which is how SIGHUP
// picks up rotated certificates without restarting anything.
import { X509Certificate, createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { type SecureContextOptions, createSecureContext } from 'node:tls'
import { type Checker, type Table, join, resolvePath } from './check.js'
import { DEFAULTS } from './defaults.js'

export interface SniConf {
  /** lower-case host names or "*.domain" wildcards (one label), from `hosts` or the certificate's DNS names */
  readonly hosts: readonly string[]
  /** absolute paths */
  readonly cert: string
  readonly key: string
}

export interface TlsConf {
  /** absolute path of the default certificate chain (PEM) */
  readonly cert: string
  /** absolute path of its private key (PEM, unencrypted) */
  readonly key: string
  /** absolute path of the CA bundle client certificates must chain to; '' = no client certificates (no mTLS) */
  readonly ca: string
  /** TLS 1.2 cipher list, OpenSSL syntax */
  readonly ciphers: string
  readonly sni: readonly SniConf[]
}

/**
 * The seed's TLS 1.3 suites. Only node:tls (the mTLS path) can be limited to
 * them; uWS's BoringSSL always offers its three TLS 1.3 suites (these two and
 * TLS_CHACHA20_POLY1305_SHA256): docs/tls-ws-tcp.md.
 */
export const TLS13_SUITES = 'TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384'

const HOST = /^(?:\*\.)?[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/

/** DNS names of a certificate (subjectAltName), else its subject CN; lower-case. */
export function certificateHosts (pem: string): string[] {
  const x = new X509Certificate(pem)
  const dns = (x.subjectAltName ?? '').split(',').map((s) => s.trim()).filter((s) => s.startsWith('DNS:')).map((s) => s.slice(4).toLowerCase())
  if (dns.length > 0) return dns
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(x.subject)?.[1]?.toLowerCase()
  return cn !== undefined && HOST.test(cn) ? [cn] : []
}

function readPem (c: Checker, path: string, file: string, what: string): string {
  try {
    const text = readFileSync(file, 'latin1')
    if (!text.includes('-----BEGIN ')) c.problem(path, `a PEM ${what} file`, `${file} without a PEM block`)
    return text
  } catch (err) {
    c.problems.push(`${path}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
    return ''
  }
}

/** Reports what OpenSSL says about a set of TLS options (bad PEM, key mismatch, no usable cipher). */
function tryContext (c: Checker, path: string, opts: SecureContextOptions): void {
  try {
    createSecureContext(opts)
  } catch (err) {
    c.problems.push(`${path}: ${(err as Error).message.replace(/^error:[0-9A-F]+:/, '')}`)
  }
}

function checkPair (c: Checker, t: Table, path: string, baseDir: string): { cert: string, key: string, certPem: string } {
  const certRel = c.string(t, 'cert', path)
  const keyRel = c.string(t, 'key', path)
  if (certRel === '' || keyRel === '') return { cert: '', key: '', certPem: '' }
  const cert = resolvePath(baseDir, certRel)
  const key = resolvePath(baseDir, keyRel)
  const certPem = readPem(c, join(path, 'cert'), cert, 'certificate')
  const keyPem = readPem(c, join(path, 'key'), key, 'private key')
  if (certPem !== '' && keyPem !== '') tryContext(c, path, { cert: certPem, key: keyPem })
  return { cert, key, certPem }
}

export function checkTls (c: Checker, raw: unknown, path: string, baseDir: string): TlsConf {
  const t = c.table(raw, path, ['cert', 'key', 'ca', 'ciphers', 'sni'])
  const { cert, key } = checkPair(c, t, path, baseDir)
  const caRel = c.string(t, 'ca', path, '')
  const ca = caRel === '' ? '' : resolvePath(baseDir, caRel)
  if (ca !== '') {
    const pem = readPem(c, join(path, 'ca'), ca, 'CA certificate')
    // OpenSSL skips PEM blocks that are not certificates: a bundle without one would refuse every client
    if (pem !== '' && !pem.includes('-----BEGIN CERTIFICATE-----')) c.problem(join(path, 'ca'), 'a PEM file with CA certificates', `${ca} without a CERTIFICATE block`)
    else if (pem !== '') tryContext(c, join(path, 'ca'), { ca: pem })
  }
  const ciphers = c.string(t, 'ciphers', path, DEFAULTS.tls.ciphers)
  if (/(?:^|:)TLS_/.test(ciphers)) {
    c.problem(join(path, 'ciphers'), 'TLS 1.2 cipher names only (TLS 1.3 suites are fixed, see docs/tls-ws-tcp.md)', ciphers)
  } else if (t.ciphers !== undefined) {
    tryContext(c, join(path, 'ciphers'), { ciphers })
  }
  const sni: SniConf[] = []
  const seen = new Set<string>()
  c.tables(t.sni, join(path, 'sni')).forEach((s, i) => {
    const sp = join(join(path, 'sni'), i)
    c.table(s, sp, ['hosts', 'cert', 'key'])
    const pair = checkPair(c, s, sp, baseDir)
    let hosts = c.strings(s, 'hosts', sp, []).map((h) => h.toLowerCase())
    if (s.hosts === undefined && pair.certPem !== '') {
      try {
        hosts = certificateHosts(pair.certPem)
      } catch (err) {
        c.problems.push(`${join(sp, 'cert')}: ${(err as Error).message}`)
      }
      if (hosts.length === 0) c.problems.push(`${sp}: the certificate names no DNS host; set hosts = ["name", ...]`)
    }
    for (const h of hosts) {
      if (!HOST.test(h)) c.problem(join(sp, 'hosts'), 'host names like "api.example.com" or "*.example.com"', h)
      else if (seen.has(h)) c.problems.push(`${join(sp, 'hosts')}: ${h} already has a certificate in ${join(path, 'sni')}`)
      seen.add(h)
    }
    sni.push({ hosts, cert: pair.cert, key: pair.key })
  })
  return { cert, key, ca, ciphers, sni }
}

/** Every file the entry point's TLS uses, in a fixed order. */
export function tlsFiles (tls: TlsConf): string[] {
  const files = [tls.cert, tls.key]
  if (tls.ca !== '') files.push(tls.ca)
  for (const s of tls.sni) files.push(s.cert, s.key)
  return files
}

/** A digest of the contents of every TLS file; throws when one cannot be read. */
export function tlsFingerprint (tls: TlsConf): string {
  const h = createHash('sha256')
  for (const f of tlsFiles(tls)) h.update(f).update('\0').update(readFileSync(f)).update('\0')
  return h.digest('hex')
}
