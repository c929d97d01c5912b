// ACME certificate resolvers ([certificates_resolvers.NAME.acme], Traefik's
// certificatesResolvers.NAME.acme in snake case) and the routers that use one
// ([routers.X.tls] cert_resolver). Static like [entrypoints]: a reload that
// changes a resolver warns that it needs a restart. The certificates are
// obtained and renewed in the control plane (core/acme/), never in workers.
//
// Challenges: http-01 on a named http entry point, or tls-alpn-01 (RFC 8737)
// on a named https entry point. uWebSockets.js 20.57 negotiates no ALPN, so an
// https entry point that a tls_challenge names is terminated in node:tls
// (core/worker/tls/tls-alpn.ts, tls-terminator.ts) like an mTLS one.
import { readFileSync } from 'node:fs'
import { type Checker, join, resolvePath } from './check.js'
import { DEFAULTS } from './defaults.js'
import { CERT_HOST, type CertRouter, routerDomains } from './router-tls.js'
import type { EntryPointConf } from './static.js'

/** EC256 = ECDSA P-256; RSA keys of 2048 or 4096 bits (Traefik's keyType names). */
export const KEY_TYPES = ['EC256', 'RSA2048', 'RSA4096'] as const
export type KeyType = typeof KEY_TYPES[number]

export interface AcmeResolverConf {
  readonly name: string
  /** account contact; '' = none (Let's Encrypt accepts accounts without one) */
  readonly email: string
  /** the CA's directory URL (https) */
  readonly caServer: string
  /** absolute path of the JSON storage file (account key, certificates and their keys) */
  readonly storage: string
  readonly keyType: KeyType
  /** absolute path of a PEM CA bundle trusted for the directory's HTTPS (private CAs); '' = the system's roots */
  readonly caCertificate: string
  /** renew this long (ms) before expiry; 0 = min(30 days, a third of the certificate's lifetime) */
  readonly renewBeforeMs: number
  readonly challenge: 'http-01' | 'tls-alpn-01'
  /** http-01: the http entry point where answers are served (reachable on port 80 for a public CA); else '' */
  readonly httpEntrypoint: string
  /** tls-alpn-01: the https entry point that answers (reachable on port 443 for a public CA); else '' */
  readonly tlsEntrypoint: string
}

/** The https entry points that answer tls-alpn-01 challenges: terminated in node:tls (core/worker/listeners.ts). */
export function tlsChallengeEntrypoints (resolvers: readonly AcmeResolverConf[]): Set<string> {
  return new Set(resolvers.filter((r) => r.challenge === 'tls-alpn-01').map((r) => r.tlsEntrypoint))
}

/**
 * Whether node:tls in worker 0 runs this entry point's handshakes (mTLS, tls-alpn-01) rather than uWS in every worker.
 * Never for the node engine: its node:https server does both itself (core/worker/transport/node/engine.ts).
 */
export function isTerminated (ep: EntryPointConf, challengeEntrypoints: ReadonlySet<string>): boolean {
  return ep.protocol === 'https' && ep.engine !== 'node' && (ep.tls!.ca !== '' || ep.http2.enabled || challengeEntrypoints.has(ep.name))
}

/** The entry point `kind`_challenge names, checked to exist with that protocol; '' when the table is absent. */
function challengeEntrypoint (c: Checker, t: Record<string, unknown>, p: string, kind: 'http' | 'tls', entrypoints: readonly EntryPointConf[]): string {
  const key = `${kind}_challenge`
  if (t[key] === undefined) return ''
  const hp = join(p, key)
  const name = c.string(c.table(t[key], hp, ['entrypoint']), 'entrypoint', hp)
  const protocol = kind === 'http' ? 'http' : 'https'
  const ep = entrypoints.find((e) => e.name === name)
  if (name !== '' && ep?.protocol !== protocol) {
    c.problem(join(hp, 'entrypoint'), `an entry point with protocol = "${protocol}" (defined: ${entrypoints.filter((e) => e.protocol === protocol).map((e) => e.name).join(', ') || 'none'})`, name)
  } else if (ep !== undefined && kind === 'tls' && ep.tls!.ca !== '') {
    c.problems.push(`${join(hp, 'entrypoint')}: entry point ${name} requires client certificates (tls.ca), which the CA's validation server does not present: tls-alpn-01 needs an https entry point without mTLS`)
  }
  return name
}

export function checkResolvers (c: Checker, raw: unknown, entrypoints: readonly EntryPointConf[], stateDir: string, baseDir: string): AcmeResolverConf[] {
  const out: AcmeResolverConf[] = []
  const storages = new Map<string, string>()
  for (const [name, v] of Object.entries(c.table(raw, 'certificates_resolvers', null))) {
    const rp = join('certificates_resolvers', name)
    const p = join(rp, 'acme')
    const t = c.table(c.table(v, rp, ['acme']).acme, p,
      ['email', 'ca_server', 'storage', 'key_type', 'ca_certificate', 'renew_before', 'http_challenge', 'tls_challenge'])
    const d = DEFAULTS.acme
    const httpEntrypoint = challengeEntrypoint(c, t, p, 'http', entrypoints)
    const tlsEntrypoint = challengeEntrypoint(c, t, p, 'tls', entrypoints)
    if ((t.http_challenge === undefined) === (t.tls_challenge === undefined)) {
      c.problems.push(`${p}: expected one challenge, [${join(p, 'http_challenge')}] entrypoint = "<an http entry point>" or [${join(p, 'tls_challenge')}] entrypoint = "<an https entry point>", found ${t.http_challenge === undefined ? 'none' : 'both'}`)
    }
    const caServer = c.string(t, 'ca_server', p, d.caServer)
    if (!/^https:\/\/[^\s/]+/.test(caServer)) c.problem(join(p, 'ca_server'), 'an https:// directory URL', caServer)
    const storage = resolvePath(stateDir, c.string(t, 'storage', p, d.storage))
    const other = storages.get(storage)
    if (other !== undefined) c.problems.push(`${join(p, 'storage')}: ${storage} is already the storage of resolver ${JSON.stringify(other)}`)
    storages.set(storage, name)
    const caRel = c.string(t, 'ca_certificate', p, '')
    const caCertificate = caRel === '' ? '' : resolvePath(baseDir, caRel)
    if (caCertificate !== '') {
      try {
        if (!readFileSync(caCertificate, 'latin1').includes('-----BEGIN CERTIFICATE-----')) c.problem(join(p, 'ca_certificate'), 'a PEM file with CA certificates', `${caCertificate} without a CERTIFICATE block`)
      } catch (err) {
        c.problems.push(`${join(p, 'ca_certificate')}: cannot read ${caCertificate}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
      }
    }
    out.push({
      name,
      email: c.string(t, 'email', p, ''),
      caServer,
      storage,
      keyType: c.oneOf(t, 'key_type', p, KEY_TYPES, d.keyType),
      caCertificate,
      renewBeforeMs: c.duration(t, 'renew_before', p, d.renewBeforeMs),
      challenge: t.tls_challenge !== undefined ? 'tls-alpn-01' : 'http-01',
      httpEntrypoint,
      tlsEntrypoint,
    })
  }
  return out
}

/** A router's resolver must exist, and the router must serve an https entry point (without mTLS) and name some host. */
export function checkRouterResolvers (c: Checker, routers: readonly CertRouter[], resolvers: readonly AcmeResolverConf[], entrypoints: readonly EntryPointConf[]): void {
  for (const r of routers) {
    if (r.tls === null) continue
    const p = join(join('routers', r.name), 'tls')
    const name = r.tls.certResolver
    if (name !== '' && !resolvers.some((x) => x.name === name)) {
      c.problems.push(`${join(p, 'cert_resolver')}: unknown certificate resolver ${JSON.stringify(name)} (defined: ${resolvers.map((x) => x.name).join(', ') || 'none; add [certificates_resolvers.NAME.acme]'})`)
    }
    const https = entrypoints.filter((e) => r.entrypoints.includes(e.name) && e.protocol === 'https')
    if (https.length === 0) c.problems.push(`${p}: the router serves no https entry point, so a certificate would never be used (entrypoints: ${r.entrypoints.join(', ')})`)
    for (const e of https) {
      if (e.tls!.ca !== '') c.problems.push(`${p}: entry point ${e.name} requires client certificates (tls.ca); ACME certificates are served on https entry points without mTLS only`)
    }
    const names = routerDomains(r)
    if (names.length === 0) c.problems.push(`${p}: no host name to certify: the rule has no Host() and domains is empty`)
    for (const h of names) if (!CERT_HOST.test(h)) c.problems.push(`${p}: ${JSON.stringify(h)} cannot be certified by http-01 (a DNS name with a dot, no wildcard)`)
  }
}
