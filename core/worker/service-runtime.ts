// A service of one data-plane generation as the request path uses it: its
// servers with their connection pools (HTTP/1.1, and HTTP/2 sessions for h2c
// and h2 services), its balancer over the shared server slots, its address
// allow-list, sticky cookies and service group. Pools outlive a generation:
// one kept in `pools` under the same key (service, server, address, keep-alive,
// protocol and TLS) serves the next generation's requests on the connections
// it already has.
import type { Config } from '../config/load.js'
import type { ServiceConf } from '../config/dynamic.js'
import type { Shm } from '../shm/layout.js'
import type { Slots } from '../protocol.js'
import { createBalancer } from '../upstream/balancer.js'
import { h2Pool } from '../upstream/h2-pool.js'
import { ServerPool } from '../upstream/pool.js'
import { StickyCookies } from '../upstream/sticky.js'
import { compileCidrs } from '../net/source.js'
import { GroupRuntime } from './proxy/service-group.js'
import type { ServiceRuntime } from './runtime.js'

const GEN_NO_TIMEOUT_MS = 24 * 3_600_000 // generation.request_timeout = "0": no time-out of its own

/** Pools by key, kept across generations (dataplane.ts closes those no service uses any more). */
export type PoolCache = Map<string, ServerPool>

/** The runtime of service `s`; the keys of the pools it uses are added to `used`. */
export function buildService (conf: Config, shm: Shm, s: ServiceConf, slots: Slots, pools: PoolCache, used: Set<string>): ServiceRuntime {
  const t = conf.timeouts
  // a non-streamed generation answers only when done: wait for it as long as the endpoint itself would
  const genMs = conf.generation.requestTimeoutMs === 0 ? GEN_NO_TIMEOUT_MS : conf.generation.requestTimeoutMs
  const serverTimeoutMs = s.kind === 'generate' ? Math.max(t.serverMs, genMs) : t.serverMs
  const servers = s.servers.map((srv) => {
    const key = `${s.name}/${srv.name}@${srv.address}#${s.keepalive}`
    let pool = pools.get(key)
    if (pool === undefined) {
      pool = new ServerPool(srv, { maxIdle: s.keepalive, connectTimeoutMs: t.connectMs, serverTimeoutMs, keepAliveMs: t.keepAliveMs })
      pools.set(key, pool)
    }
    used.add(key)
    // a changed [services.X.tls] (a renewed CA) gets new sessions
    const h2 = s.protocol === 'http' ? null : h2Pool(`${key}#${s.protocol}${s.tls === null ? '' : JSON.stringify(s.tls)}`, srv, s.tls, t.connectMs)
    return { conf: srv, slot: slots.servers[`${s.name}/${srv.name}`]!, pool, h2 }
  })
  const slot = slots.services[s.name]!
  return {
    conf: s,
    slot,
    servers,
    balancer: createBalancer(s.balance, shm, slot, servers.map((x) => ({ slot: x.slot, key: x.conf.address }))),
    allow: compileCidrs(s.allow), // the one address matcher, shared with the ipAllowList middleware
    hostFallback: s.servers[0]?.address ?? 'localhost',
    sticky: s.sticky === null ? null : new StickyCookies(s.sticky, s.name, s.servers),
    group: s.group === null ? null : new GroupRuntime(s.group),
  }
}
