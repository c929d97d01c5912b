// Full TLS handshakes with servers, for `show info` SslBackendKeyRate and
// SslBackendMaxKeyRate: HAProxy counts an SSL key computation on a server
// connection whose session was not resumed. Every thread that opens TLS
// connections to servers (core/upstream/connection.ts, h2-pool.ts) counts in
// its own stripe: a data-plane worker for its requests, the control plane for
// its h2 health checks and model-server calls. The cost is one stripe add per
// handshake, on 'secureConnect'; nothing per request.
import type tls from 'node:tls'
import type { Stripe } from '../shm/counters.js'
import { G_SSL_BACKEND_KEYS } from '../shm/layout.js'

/** this thread's stripe; null until set (a unit test's connections count nowhere) */
let stripe: Stripe | null = null

/** Counts this thread's handshakes with servers in `s`, the thread's own stripe. Called once at the thread's start. */
export function countServerHandshakesIn (s: Stripe): void {
  stripe = s
}

/** A 'secureConnect' listener of a TLS socket to a server: counts the handshake unless the session was resumed. */
export function onServerHandshake (this: tls.TLSSocket): void {
  if (stripe !== null && !this.isSessionReused()) stripe.add(G_SSL_BACKEND_KEYS)
}
