// One server's live state read from shared memory, in the words each surface
// uses: Data Plane API admin/operational state, HAProxy stats status, Traefik
// UP/DOWN. The single place that interprets the S_* words for display.
import type { ServerConf, ServiceConf } from '../config/dynamic.js'
import { formatHostPort } from '../config/static.js'
import {
  ADMIN_STATES, C_INFLIGHT, CHECK_STATUS, CHECK_UP, S_ADMIN, S_CHECK, S_CHECK_CODE, S_CHECK_FAILS, S_CHECK_MS,
  S_CHECK_STATUS, S_DOWN_COUNT, S_DOWN_UNTIL, S_LAST_CHANGE, S_STREAK, S_WEIGHT, serverBase,
} from '../shm/layout.js'
import { sumServer } from '../shm/counters.js'
import type { AdminCore } from './core.js'

export interface ServerView {
  readonly slot: number
  readonly admin: 'ready' | 'drain' | 'maint'
  /** passes checks (or is not checked) and is not passively marked down */
  readonly healthy: boolean
  /** the health checker's verdict alone (no check = up), before passive marking */
  readonly checkUp: boolean
  readonly operational: 'up' | 'down' | 'stopping'
  /** HAProxy `show stat` status column */
  readonly status: string
  /** Traefik serverStatus */
  readonly traefik: 'UP' | 'DOWN'
  readonly weight: number
  readonly inflight: number
  readonly checkStatus: string
  readonly checkCode: number
  readonly checkMs: number
  readonly checkFails: number
  readonly downCount: number
  /** consecutive passes (> 0) or failures (< 0) */
  readonly streak: number
  /** seconds since the last UP/DOWN change (since start when none) */
  readonly sinceChangeSec: number
}

export function serverView (ctx: Pick<AdminCore, 'slots' | 'shm' | 'startedAt'>, svc: ServiceConf, srv: ServerConf): ServerView {
  const slot = ctx.slots.server(svc.name, srv.name) ?? -1
  const i32 = ctx.shm.i32
  const b = serverBase(Math.max(slot, 0))
  const admin = ADMIN_STATES[Atomics.load(i32, b + S_ADMIN)] ?? 'ready'
  const now = Date.now() | 0
  const until = Atomics.load(i32, b + S_DOWN_UNTIL)
  const passiveDown = until !== 0 && ((now - until) | 0) < 0
  const checkUp = Atomics.load(i32, b + S_CHECK) === CHECK_UP
  const healthy = checkUp && !passiveDown
  const weight = Atomics.load(i32, b + S_WEIGHT)
  let status: string
  if (admin === 'maint') status = 'MAINT'
  else if (!healthy) status = 'DOWN'
  else if (admin === 'drain') status = 'DRAIN'
  else if (weight === 0) status = 'NOLB'
  else status = srv.check ? 'UP' : 'no check'
  const last = Atomics.load(i32, b + S_LAST_CHANGE)
  return {
    slot,
    admin,
    healthy,
    checkUp,
    operational: !healthy ? 'down' : admin === 'drain' ? 'stopping' : 'up',
    status,
    traefik: healthy && admin !== 'maint' ? 'UP' : 'DOWN',
    weight,
    inflight: slot < 0 ? 0 : sumServer(ctx.shm, slot, C_INFLIGHT),
    checkStatus: srv.check ? CHECK_STATUS[Atomics.load(i32, b + S_CHECK_STATUS)] ?? 'UNK' : '',
    checkCode: Atomics.load(i32, b + S_CHECK_CODE),
    checkMs: Atomics.load(i32, b + S_CHECK_MS),
    checkFails: Atomics.load(i32, b + S_CHECK_FAILS),
    downCount: Atomics.load(i32, b + S_DOWN_COUNT),
    streak: Atomics.load(i32, b + S_STREAK),
    sinceChangeSec: Math.max(0, Math.floor(((now - (last !== 0 ? last : (ctx.startedAt | 0))) | 0) / 1000)),
  }
}

/** "http://host:port" or "unix:/path" for Traefik-style server URLs and metric labels. */
export function serverUrl (srv: ServerConf): string {
  return srv.path !== '' ? `unix:${srv.path}` : `http://${formatHostPort(srv.host, srv.port)}`
}
