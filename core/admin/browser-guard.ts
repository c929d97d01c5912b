// What keeps a web page in a browser on this host off the management
// listeners. A listener on loopback is reachable by every page the operator's
// browser opens: a cross-site request (a POST with a body of no declared type
// needs no preflight) could add a server, and a name the attacker re-points to
// 127.0.0.1 (DNS rebinding) could read and write everything on a listener
// without credentials. So: a request that says it comes from another origin
// is refused, and a listener on loopback without credentials answers only
// requests that name it by a loopback host. curl, promtool, Prometheus and
// hatop send no Origin; the dashboard page's requests are same-origin.
import { isLoopbackHost } from '../config/admin.js'

/** The host name of a Host header value ("127.0.0.1:5555", "[::1]:5555", "localhost"), lower-case; '' when it is not one. */
function hostName (host: string): string {
  try {
    return new URL(`http://${host}`).hostname.replace(/^\[|\]$/g, '')
  } catch {
    return ''
  }
}

/** Whether a listener answers only loopback Host names: it is on loopback and asks for no credentials. */
export function localOnly (listenerHost: string, authenticated: boolean): boolean {
  return !authenticated && isLoopbackHost(listenerHost)
}

/** Why a request is refused (403), or '' when it may go on. `local`: the listener's localOnly(). */
export function browserRefusal (host: string | undefined, origin: string | undefined, local: boolean): string {
  if (origin !== undefined && origin !== `http://${host ?? ''}` && origin !== `https://${host ?? ''}`) {
    return `cross-origin request from ${JSON.stringify(origin.slice(0, 200))} refused`
  }
  if (local && host !== undefined && !isLoopbackHost(hostName(host))) {
    return `Host ${JSON.stringify(host.slice(0, 200))} is not a loopback name: this listener has no credentials and answers local clients only`
  }
  return ''
}
