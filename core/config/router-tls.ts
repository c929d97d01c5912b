// [routers.X.tls]: a router's certificates from an ACME resolver (acme.ts
// checks the resolvers, and that each router's resolver exists and can serve
// it). Its own module so that dynamic.ts (routers) and acme.ts (resolvers)
// share it without an import circle.
import { type Checker, join } from './check.js'
import { type Rule, positiveHosts } from './rules/rule.js'

/** [routers.X.tls]: certificates for the router's Host() names (and `domains`) from a resolver. */
export interface RouterTlsConf {
  readonly certResolver: string
  /** extra names, lower-case */
  readonly domains: readonly string[]
}

/** A DNS name http-01 can prove: at least two labels, no wildcard; lower-case. */
export const CERT_HOST = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/

/** [routers.X.tls]: cert_resolver (required) and domains; the resolver's existence is checked by checkRouterResolvers. */
export function checkRouterTls (c: Checker, raw: unknown, path: string): RouterTlsConf | null {
  if (raw === undefined) return null
  const t = c.table(raw, path, ['cert_resolver', 'domains'])
  const domains = c.strings(t, 'domains', path, []).map((h) => h.toLowerCase().replace(/\.$/, ''))
  for (const h of domains) if (!CERT_HOST.test(h)) c.problem(join(path, 'domains'), 'host names like "www.example.com" (no wildcards: http-01 cannot prove them)', h)
  return { certResolver: c.string(t, 'cert_resolver', path), domains }
}

/** What checkRouterResolvers and routerDomains read of a router (dynamic.ts RouterConf, which imports this module). */
export interface CertRouter {
  readonly name: string
  readonly ast: Rule
  readonly entrypoints: readonly string[]
  readonly tls: RouterTlsConf | null
}

/** The names a router's certificate covers: its rule's Host() values (not those under a "!"), then `domains`, without repeats; the first is the subject. */
export function routerDomains (r: CertRouter): string[] {
  return [...new Set([...positiveHosts(r.ast), ...(r.tls?.domains ?? [])])]
}
