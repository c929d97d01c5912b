// Serves ACME certificates (core/acme/manager.ts) by SNI on a worker's uWS
// https listeners, beside the entry point's own tls.sni certificates, without
// a restart: names are added to and removed from the running SSLApp
// (Listener.setServerName). A certificate renewed for the same names replaces
// the served one for new handshakes; established connections keep theirs.
// A name that the entry point's tls.sni already serves keeps that certificate.
import type { EntryPointConf } from '../config/static.js'
import type { AcmeCert } from '../protocol.js'
import type { Listener } from './http.js'

/** What each listener serves by ACME: host → certificate version. A listener made anew (a TLS reload) starts empty. */
const served = new WeakMap<Listener, Map<string, string>>()

/** Makes `l` (entry point `ep`) serve exactly the ACME certificates meant for it. */
export function applyAcmeCerts (ep: EntryPointConf, l: Listener, certs: readonly AcmeCert[]): void {
  const set = l.setServerName
  if (set === undefined || ep.tls === null) return
  const own = new Set(ep.tls.sni.flatMap((s) => s.hosts))
  const want = new Map<string, AcmeCert>()
  for (const c of certs) {
    if (!c.entrypoints.includes(ep.name)) continue
    for (const h of c.hosts) if (!own.has(h)) want.set(h, c)
  }
  let now = served.get(l)
  if (now === undefined) served.set(l, now = new Map())
  for (const h of [...now.keys()]) {
    if (want.has(h)) continue
    set(h, null)
    now.delete(h)
  }
  for (const [h, c] of want) {
    if (now.get(h) === c.version) continue
    set(h, c)
    now.set(h, c.version)
  }
}
