// ACME certificates (core/acme/manager.ts) served by SNI on a worker's uWS
// https listeners: they join the entry point's own tls.sni certificates (a
// name tls.sni already has keeps its certificate). uWS cannot replace a
// name's certificate in a running app safely (removeServerName frees the
// name's router while connections that chose it may still use it), so a
// change makes a new app on the same address, as a TLS reload does
// (listeners.ts): new handshakes get the new certificate, established
// connections carry on with the old one.
import type { EntryPointConf } from '../../config/static.js'
import type { SniConf, TlsConf } from '../../config/tls.js'
import type { AcmeCert } from '../../protocol.js'

function forEntryPoint (ep: EntryPointConf, certs: readonly AcmeCert[]): Array<{ hosts: string[], cert: AcmeCert }> {
  const own = new Set(ep.tls?.sni.flatMap((s) => s.hosts) ?? [])
  return certs.filter((c) => c.entrypoints.includes(ep.name)).map((cert) => ({ hosts: cert.hosts.filter((h) => !own.has(h)), cert }))
    .filter((x) => x.hosts.length > 0)
}

/** The entry point's TLS settings with the ACME certificates meant for it as more SNI entries. */
export function withAcme (ep: EntryPointConf, certs: readonly AcmeCert[]): TlsConf {
  const tls = ep.tls!
  const extra: SniConf[] = forEntryPoint(ep, certs).map((x) => ({ hosts: x.hosts, cert: x.cert.cert, key: x.cert.key }))
  return extra.length === 0 ? tls : { ...tls, sni: [...tls.sni, ...extra] }
}

/** What ACME serves on the entry point, as text: when it changes, the listener is made anew. */
export function acmeKey (ep: EntryPointConf, certs: readonly AcmeCert[]): string {
  return forEntryPoint(ep, certs).map((x) => `${x.hosts.join(',')}=${x.cert.version}`).join(';')
}
