// Entry points on port 0 ("127.0.0.1:0"): the kernel picks the port when
// worker 0 binds it (the supervisor starts worker 0 alone first), and from then
// on the entry point is that port: the other workers join it (they share the
// address, SO_REUSEPORT), a worker restarted later binds it again, the
// management surfaces show it, and a reload of the same file (still :0) is no
// change of entry points, which are static (core/main.ts).
import type { Config } from '../config/load.js'
import type { EntryPointConf } from '../config/static.js'

/** entry point name → the port the kernel gave it; only entry points written with port 0 */
export type BoundPorts = Readonly<Record<string, number>>

/** Of the ports a worker reported for its listeners (by entry point name), those of the entry points on port 0. */
export function portsBound (eps: readonly EntryPointConf[], reported: Readonly<Record<string, number>>): BoundPorts {
  const out: Record<string, number> = {}
  for (const ep of eps) {
    if (ep.port !== 0) continue
    const port = Object.hasOwn(reported, ep.name) ? reported[ep.name]! : 0
    // worker 0 hosts every public listener (tcp and terminated TLS ones only there), so it has them all
    if (port === 0) throw new Error(`entry point ${ep.name}: worker 0 reported no port for its address ${ep.host}:0`)
    out[ep.name] = port
  }
  return out
}

/** `config` with each entry point on port 0 given the port it is bound to; the others unchanged. */
export function withBoundPorts (config: Config, bound: BoundPorts): Config {
  const given = (ep: EntryPointConf): boolean => ep.port === 0 && Object.hasOwn(bound, ep.name)
  if (!config.entrypoints.some(given)) return config
  return { ...config, entrypoints: config.entrypoints.map((ep) => given(ep) ? { ...ep, port: bound[ep.name]! } : ep) }
}
