// The secure contexts of an https entry point served on node:tls (the mTLS
// terminator, tls-terminator.ts, and the node engine, transport/node/engine.ts),
// one per SNI certificate, with what uWS's BoringSSL does on the other https
// entry points, so that a client meets the same TLS whichever serves it: TLS 1.2
// minimum, the seed's TLS 1.3 suites then the entry point's TLS 1.2 ciphers, the
// client's cipher order (BoringSSL's, and nginx's default; every suite offered is
// an AEAD one), BoringSSL's key-exchange groups (OpenSSL's default adds P-521,
// X448 and finite-field groups), no renegotiation (Node's default allows a client
// three per ten minutes, each a full handshake on worker 0's thread), and the CA
// that turns on client certificates.
import { constants } from 'node:crypto'
import { readFileSync } from 'node:fs'
import tls from 'node:tls'
import { TLS13_SUITES, type TlsConf } from '../../config/tls.js'

export interface Contexts {
  readonly main: tls.SecureContextOptions & { ticketKeys?: Buffer }
  /** exact host → context, and "*.domain" wildcards under their domain suffix ".domain" */
  readonly exact: Map<string, tls.SecureContext>
  readonly wildcard: Map<string, tls.SecureContext>
}

/** Session ticket keys shared by every worker (WorkerData.ticketKeys); undefined: node:tls makes its own per server. */
let ticketKeys: Buffer | undefined

/** Encrypts node:tls session tickets with these keys (48 bytes) in contexts loaded from now on. */
export function shareTicketKeys (keys: Uint8Array): void { ticketKeys = Buffer.from(keys) }

/** The key-exchange groups uWS's BoringSSL offers, in its order. */
const GROUPS = 'X25519:P-256:P-384'

/** Reads every file now; throws (with OpenSSL's reason) when one is unusable. */
export function loadContexts (conf: TlsConf): Contexts {
  const ca = conf.ca === '' ? undefined : readFileSync(conf.ca)
  const common = {
    ca,
    minVersion: 'TLSv1.2' as const,
    ciphers: `${TLS13_SUITES}:${conf.ciphers}`,
    honorCipherOrder: false,
    ecdhCurve: GROUPS,
    secureOptions: constants.SSL_OP_NO_RENEGOTIATION,
  }
  // ticketKeys in `main` too: setSecureContext (new certificates) would otherwise give the server new random keys
  const main = { ...common, ticketKeys, cert: readFileSync(conf.cert), key: readFileSync(conf.key) }
  tls.createSecureContext(main) // validates now, so a bad file is reported here rather than at the next handshake
  const exact = new Map<string, tls.SecureContext>()
  const wildcard = new Map<string, tls.SecureContext>()
  for (const s of conf.sni) {
    const ctx = tls.createSecureContext({ ...common, cert: readFileSync(s.cert), key: readFileSync(s.key) })
    for (const h of s.hosts) {
      if (h.startsWith('*.')) wildcard.set(h.slice(1), ctx)
      else exact.set(h, ctx)
    }
  }
  return { main, exact, wildcard }
}

/** The context of an SNI name: its exact host, else its "*.domain" wildcard; undefined: the server's default context. */
export function sniContext (c: Contexts, name: string): tls.SecureContext | undefined {
  const host = name.toLowerCase()
  const exact = c.exact.get(host)
  if (exact !== undefined) return exact
  const dot = host.indexOf('.')
  return dot > 0 ? c.wildcard.get(host.slice(dot)) : undefined
}
