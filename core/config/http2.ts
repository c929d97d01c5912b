// [entrypoints.NAME.http2]: HTTP/2 to clients (core/worker/transport/h2/h2.ts). On an https
// entry point ALPN offers h2 beside http/1.1 when enabled; an h2c entry point
// (protocol = "h2c") speaks HTTP/2 with prior knowledge only. The limits are
// the SETTINGS lb announces and the session's idle time-out (each default's
// reason is in defaults.ts); node:http2's own abuse knobs are fixed in transport/h2/h2.ts.
// Written `http2 = true | false`, or as a table with `enabled` and the limits
// (Traefik: entryPoints.NAME.http2.maxConcurrentStreams).
import { type Checker, type Table, join } from './check.js'
import { DEFAULTS } from './defaults.js'

export interface Http2Conf {
  /** https: ALPN offers h2 (always true for h2c, false for http) */
  readonly enabled: boolean
  /** SETTINGS_MAX_CONCURRENT_STREAMS: streams a client may have open at once */
  readonly maxConcurrentStreams: number
  /** SETTINGS_MAX_HEADER_LIST_SIZE, bytes (HPACK-decoded names + values + 32 each) */
  readonly maxHeaderListSize: number
  /** header fields one request may carry (node:http2 maxHeaderListPairs) */
  readonly maxHeaderPairs: number
  /** SETTINGS_INITIAL_WINDOW_SIZE: per-stream flow-control window, bytes */
  readonly initialWindowSize: number
  /** a session with no frame either way for this long is sent GOAWAY and closed, ms */
  readonly idleTimeoutMs: number
}

const KEYS = ['enabled', 'max_concurrent_streams', 'max_header_list_size', 'max_header_pairs', 'initial_window_size', 'idle_timeout']

/** `h2c`: the entry point's protocol is h2c (enabled whatever the table says). */
export function checkHttp2 (c: Checker, raw: unknown, p: string, h2c: boolean): Http2Conf {
  const d = DEFAULTS.http2
  const hp = join(p, 'http2')
  let t: Table = {}
  if (typeof raw === 'boolean') t = { enabled: raw }
  else if (raw !== undefined) t = c.table(raw, hp, KEYS)
  if (h2c && t.enabled === false) c.problem(join(hp, 'enabled'), 'true or nothing (protocol = "h2c" is HTTP/2 only)', false)
  return {
    enabled: h2c || c.bool(t, 'enabled', hp, d.enabled),
    maxConcurrentStreams: c.int(t, 'max_concurrent_streams', hp, d.maxConcurrentStreams, 1, 10_000),
    maxHeaderListSize: clamp(c, t, 'max_header_list_size', hp, d.maxHeaderListSize, 1024, 1024 * 1024),
    maxHeaderPairs: c.int(t, 'max_header_pairs', hp, d.maxHeaderPairs, 4, 10_000),
    initialWindowSize: clamp(c, t, 'initial_window_size', hp, d.initialWindowSize, 1024, 2 ** 31 - 1),
    idleTimeoutMs: c.duration(t, 'idle_timeout', hp, d.idleTimeoutMs, 1000, 24 * 3_600_000),
  }
}

function clamp (c: Checker, t: Table, key: string, p: string, def: number, min: number, max: number): number {
  const v = c.size(t, key, p, def)
  if (v < min || v > max) c.problem(join(p, key), `a size from ${min} to ${max} bytes`, t[key])
  return v
}
