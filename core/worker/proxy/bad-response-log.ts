// Why a server's response was refused, in the log: nginx's "upstream sent
// invalid header while reading response header from upstream", naming the
// service, the server (name and address), the reason and what the client got.
// The client's 502 itself says nothing of the server (its message is the
// code's); the access log has the request with its status.
//
// Not a log flood lever: a server that answers every request with garbage
// (or a client that keeps asking for the URL that makes it do so) gets at most
// one line per server and reason every WINDOW_MS in each worker; the next line
// after a quiet window says how many were left out. The reasons are the
// parser's fixed set, so the table stays small; it is emptied if it ever grows
// past MAX_KEYS (servers come and go with reloads).
import { now } from '../../clock.js'
import type { Logger } from '../../log.js'

const WINDOW_MS = 10_000
const MAX_KEYS = 4096

interface Window {
  /** tick until which the same reason from the same server is only counted */
  until: number
  /** lines left out since the last one written */
  left: number
}

const windows = new Map<string, Window>()

export interface BadResponse {
  readonly service: string
  readonly server: string
  /** as the config writes it: "host:port" or "unix:/path" */
  readonly address: string
  /** one of the response parser's reasons ("invalid status line"), or what cut the response short */
  readonly reason: string
  /** the value at fault (response-parser.ts `detail`), '' when none */
  readonly detail: string
  /** false: the response head was out already, so the client's connection was cut instead of a 502 */
  readonly beforeHead: boolean
  readonly method: string
  /** the request path (never the query: it may carry tokens) */
  readonly path: string
}

/** Logs `r` at error level, unless the same server gave the same reason within the window. */
export function logBadResponse (log: Logger, r: BadResponse): void {
  const key = `${r.service}\u0000${r.server}\u0000${r.address}\u0000${r.reason}`
  const t = now()
  const w = windows.get(key)
  if (w !== undefined && ((t - w.until) | 0) < 0) {
    w.left++
    return
  }
  if (w === undefined && windows.size >= MAX_KEYS) windows.clear()
  windows.set(key, { until: (t + WINDOW_MS) | 0, left: 0 })
  log.error(`upstream server sent an invalid response (${r.reason}) while reading the response ${r.beforeHead ? 'head: answered 502' : 'body: the client connection was cut'}`, {
    code: 'LB_ERR_UPSTREAM_PROTOCOL',
    service: r.service,
    server: r.server,
    address: r.address,
    reason: r.reason,
    detail: r.detail === '' ? undefined : r.detail,
    request: `${r.method} ${r.path}`,
    // the same reason from this server in the window before this line, not logged one by one
    suppressed: w === undefined || w.left === 0 ? undefined : w.left,
  })
}
