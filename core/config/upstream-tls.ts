// [services.X.tls]: how lb speaks TLS to the servers of a service with
// protocol = "h2" (HTTP/2 over TLS, ALPN h2; core/upstream/h2-pool.ts).
// Names as Traefik's serversTransport has them (rootCAs, serverName,
// insecureSkipVerify), in lb's snake_case. The CA file is read here, once per
// load, so a worker gets the certificates in the frozen snapshot and a reload
// picks up a renewed CA.
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { type Checker, join, resolvePath } from './check.js'

export interface UpstreamTlsConf {
  /** the configured ca_file, resolved ('' = Node's bundled root CAs) */
  readonly caFile: string
  /** its PEM text: the only CAs a server's certificate may chain to when set */
  readonly ca: string
  /** SNI and the name the certificate must hold; '' = the server's host when it is a name (an IP address is checked against the certificate's IP SANs, without SNI) */
  readonly serverName: string
  /** accept any certificate (Traefik insecureSkipVerify): for tests and self-signed lab servers only */
  readonly insecureSkipVerify: boolean
}

/** protocol = "h2" without a tls table: verified against Node's root CAs, SNI from the address */
export const DEFAULT_UPSTREAM_TLS: UpstreamTlsConf = Object.freeze({ caFile: '', ca: '', serverName: '', insecureSkipVerify: false })

const KEYS = ['ca_file', 'server_name', 'insecure_skip_verify']
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/

/** The service's tls table; null when it has none. */
export function checkUpstreamTls (c: Checker, raw: unknown, path: string, baseDir: string): UpstreamTlsConf | null {
  if (raw === undefined) return null
  const t = c.table(raw, path, KEYS)
  const caName = c.string(t, 'ca_file', path, '')
  const caFile = caName === '' ? '' : resolvePath(baseDir, caName)
  let ca = ''
  if (caFile !== '') {
    try {
      ca = readFileSync(caFile, 'utf8')
    } catch {
      // reported below
    }
    if (!ca.includes('-----BEGIN CERTIFICATE-----')) c.problem(join(path, 'ca_file'), 'a readable PEM file of CA certificates', caFile)
  }
  const serverName = c.string(t, 'server_name', path, '')
  if (serverName !== '' && (!HOST_NAME.test(serverName) || isIP(serverName) !== 0)) c.problem(join(path, 'server_name'), 'a host name (SNI takes no IP address)', serverName)
  return { caFile, ca, serverName, insecureSkipVerify: c.bool(t, 'insecure_skip_verify', path, false) }
}
