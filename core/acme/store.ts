// The storage file of one ACME resolver: its account (key and URL at the CA)
// and every certificate it obtained, with its key. JSON, mode 0600 (it holds
// private keys), replaced atomically (core/atomic-file.ts) after every change,
// so a restart serves the stored certificates without a new order.
//
// The file belongs to one CA: when the resolver's ca_server changes (staging
// → production), what it holds is not used (a staging certificate is not
// trusted by browsers) and the first write replaces it.
import { X509Certificate } from 'node:crypto'
import { readFileSync, renameSync } from 'node:fs'
import { writeFileAtomic } from '../atomic-file.js'
import { lbError } from '../errors.js'

export const STORE_FORMAT = 1

export interface StoredAccount {
  /** PEM private key */
  readonly key: string
  /** account URL at the CA ('' until the CA has created it) */
  readonly url: string
}

export interface StoredCert {
  /** the names it covers, the subject first */
  readonly domains: readonly string[]
  /** PEM chain: the certificate, then its issuers */
  readonly cert: string
  /** PEM private key */
  readonly key: string
}

export interface Store {
  readonly caServer: string
  readonly account: StoredAccount | null
  readonly certificates: readonly StoredCert[]
}

function isStrings (v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string')
}

function parse (text: string): Store {
  const v = JSON.parse(text) as Record<string, unknown>
  if (v === null || typeof v !== 'object' || v.format !== STORE_FORMAT || typeof v.ca_server !== 'string' || !Array.isArray(v.certificates)) {
    throw new Error(`not a format ${STORE_FORMAT} ACME storage file`)
  }
  const a = v.account as Record<string, unknown> | null
  if (a !== null && (typeof a !== 'object' || typeof a.key !== 'string' || typeof a.url !== 'string')) throw new Error('account: expected {key, url}')
  const certificates = (v.certificates as unknown[]).map((c, i) => {
    const x = c as Record<string, unknown>
    if (x === null || typeof x !== 'object' || !isStrings(x.domains) || typeof x.cert !== 'string' || typeof x.key !== 'string') {
      throw new Error(`certificates[${i}]: expected {domains, cert, key}`)
    }
    return { domains: x.domains, cert: x.cert, key: x.key }
  })
  return { caServer: v.ca_server, account: a === null ? null : { key: a.key as string, url: a.url as string }, certificates }
}

export interface Loaded {
  readonly store: Store
  /** set when the file was unusable and set aside: the LB_ERR_ACME_STORAGE message */
  readonly error: string | null
}

/**
 * Reads a resolver's storage; a missing file, or one of another CA, is an
 * empty store. An unusable file is renamed to `<file>.bad-<time>` (kept for
 * the operator, never overwritten) and reported.
 */
export function readStore (resolver: string, file: string, caServer: string): Loaded {
  const empty: Store = { caServer, account: null, certificates: [] }
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { store: empty, error: null }
    return { store: empty, error: lbError('LB_ERR_ACME_STORAGE', { resolver, file, reason: (err as Error).message }).message }
  }
  try {
    const store = parse(text)
    return { store: store.caServer === caServer ? store : empty, error: null }
  } catch (err) {
    const aside = `${file}.bad-${Date.now()}`
    let moved = ''
    try {
      renameSync(file, aside)
      moved = `; renamed to ${aside}`
    } catch { /* left in place: the first write replaces it */ }
    return { store: empty, error: lbError('LB_ERR_ACME_STORAGE', { resolver, file, reason: (err as Error).message + moved }).message }
  }
}

export function writeStore (file: string, store: Store): void {
  const certificates = store.certificates.map((c) => ({ domains: c.domains, cert: c.cert, key: c.key }))
  writeFileAtomic(file, JSON.stringify({ format: STORE_FORMAT, ca_server: store.caServer, account: store.account, certificates }, null, 2) + '\n')
}

/** What lb needs to know of a certificate chain's first certificate. */
export interface CertInfo {
  /** ms since the epoch */
  readonly notBefore: number
  readonly notAfter: number
  /** issuer's distinguished name, one line */
  readonly issuer: string
  readonly serial: string
}

export function certInfo (pem: string): CertInfo {
  const x = new X509Certificate(pem)
  return {
    notBefore: Date.parse(x.validFrom),
    notAfter: Date.parse(x.validTo),
    issuer: x.issuer.split('\n').join(', '),
    serial: x.serialNumber,
  }
}
