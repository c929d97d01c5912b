// What Linux does to connections when lb replaces a listener. uWS cannot
// change the certificate of a listening SSLApp, so a certificate change
// (SIGHUP, config API, ACME renewal) starts a new listener in the
// SO_REUSEPORT group and closes the old one (core/worker/listeners.ts). Linux
// resets every connection still waiting in the closed socket's accept queue,
// unless net.ipv4.tcp_migrate_req is 1 (Linux >= 5.14): then it moves them to
// another listener of the group. Under load that queue is often not empty:
// with 2 clients handshaking in a loop, 40 reloads reset 27 of 4,264
// handshakes with 0 and none with 1 (nginx, which keeps its listening
// sockets: none); bench/RESULTS.md, "Faults campaign", cert-swap.
import { readFileSync } from 'node:fs'

const SYSCTL = '/proc/sys/net/ipv4/tcp_migrate_req'

/** '0' or '1'; '' when the kernel has no such setting (before 5.14, or not Linux). */
export function migrateReq (): string {
  try {
    return readFileSync(SYSCTL, 'latin1').trim()
  } catch {
    return ''
  }
}

/**
 * The warning for the operator when certificate changes on these entry points
 * (https ones that uWS serves itself) would reset connections; null when none.
 */
export function listenerSwapWarning (entrypoints: readonly string[]): string | null {
  if (entrypoints.length === 0 || migrateReq() === '1') return null
  return 'net.ipv4.tcp_migrate_req is not 1: a certificate change resets the connections waiting in each replaced listener\'s ' +
    'accept queue; set it to 1 (sysctl -w net.ipv4.tcp_migrate_req=1, Linux >= 5.14; docs/tls-ws-tcp.md)'
}
