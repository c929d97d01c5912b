// The per-generation runtime shapes the data plane (dataplane.ts) builds and
// the proxies (proxy.ts, ws-proxy.ts, tcp-proxy.ts) use, and ExchangeHost: what
// a proxy needs of the data plane. In their own module so the proxies never
// import dataplane.ts, which creates them.
import type { ServiceConf } from '../config/dynamic.js'
import type { ServiceGroup } from '../config/service-group.js'
import type { ErrorCode } from '../errors.js'
import type { Logger } from '../log.js'
import type { Config } from '../config/load.js'
import type { Stripe } from '../shm/counters.js'
import type { Shm } from '../shm/layout.js'
import type { Balancer } from '../upstream/balance.js'
import type { H2Pool } from '../upstream/h2-pool.js'
import type { ServerPool } from '../upstream/pool.js'
import type { StickyCookies } from '../upstream/sticky.js'
import type { Chain } from './request/chain.js'
import type { ClientResponse } from './transport/client.js'
import type { Ctx } from './request/context.js'

export interface ServerRuntime {
  readonly conf: ServiceConf['servers'][number]
  readonly slot: number
  readonly pool: ServerPool
  /** the server's HTTP/2 session when its service has protocol = "h2c"; null otherwise */
  readonly h2: H2Pool | null
}

export interface ServiceRuntime {
  readonly conf: ServiceConf
  readonly slot: number
  readonly servers: readonly ServerRuntime[]
  readonly balancer: Balancer
  /** status service: who may read it */
  readonly allow: (ip: string) => boolean
  /** Host header for requests that came without one */
  readonly hostFallback: string
  /** sticky sessions by cookie ([services.X.sticky.cookie]); null = none */
  readonly sticky: StickyCookies | null
  /** kind weighted or failover: which service takes a request (proxy/service-group.ts); null for the other kinds */
  readonly group: ServiceGroupRuntime | null
}

/** A weighted or failover service at run time (implemented by proxy/service-group.ts GroupRuntime). */
export interface ServiceGroupRuntime {
  /** resolves the services it names, once every service of the generation is built */
  link (byName: ReadonlyMap<string, ServiceRuntime>): void
  /** the service that takes a request now (`i32`: shared memory, `t`: the tick) */
  pick (i32: Int32Array, t: number): ServiceRuntime
  /** kind mirroring: the mirrors that get a copy of this request (null: none) */
  mirrorsFor (): ServiceRuntime[] | null
  readonly conf: ServiceGroup
}

export interface RouteTarget {
  readonly service: ServiceRuntime | null
  readonly chain: Chain
  /** the router's request-stats slot (/metrics) */
  readonly routerSlot: number
  /** when `service` is a group: this target with each service the group picked (service-group.ts leafTarget); else null */
  readonly leaves: Map<ServiceRuntime, RouteTarget> | null
}

/** What an exchange (proxy.ts, ws-proxy.ts, tcp-proxy.ts) needs of the data plane that started it (DataPlane). */
export interface ExchangeHost {
  readonly conf: Config
  readonly shm: Shm
  readonly stripe: Stripe
  readonly log: Logger
  /** answers with an lb error page and counts the request */
  error (ctx: Ctx, client: ClientResponse, code: ErrorCode, params: Record<string, string | number>, close?: boolean, extra?: readonly string[]): void
  /** counts a finished request and writes its access-log line */
  finish (ctx: Ctx): void
}
