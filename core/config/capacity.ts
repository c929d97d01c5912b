// Capacities of the shared memory (core/shm/layout.ts) and the one check that
// a configuration fits them. `lb check`, `lb run` (through buildConfig), every
// reload and every config API write (before anything is written) call
// capacityProblems, so a configuration one of them accepts, the others accept
// too, with the same message.
//
// `limits.services`, `limits.servers` and `limits.routers` are numbers or
// "auto". The shared memory is sized once at start, so "auto" chooses then:
// twice what the starting configuration has (headroom for the config API and
// reloads), and never less than the floor (256 services, 1,024 servers,
// 256 routers). What each costs in memory: conf/lb.toml [limits].
import { type Capacities, DEFAULT_CAPACITIES, MAX_ENTRYPOINTS } from '../shm/layout.js'

/** headroom of "auto": room for this many times what the starting configuration has */
export const AUTO_HEADROOM = 2
/** largest explicit capacity: keeps the shared memory under about 1 GiB with 64 workers */
export const MAX_CAPACITY = 65_536

/** What a configuration needs (the parts of Config the check reads). */
export interface Needs {
  readonly services: ReadonlyArray<{ readonly servers: readonly unknown[] }>
  readonly routers: readonly unknown[]
  readonly entrypoints: readonly unknown[]
}

/** [limits] capacities as configured: 0 = "auto". */
export interface CapacityLimits {
  readonly services: number
  readonly servers: number
  readonly routers: number
}

function count (c: Needs): Capacities {
  let servers = 0
  for (const s of c.services) servers += s.servers.length
  return { services: c.services.length, servers, routers: c.routers.length }
}

/** The capacities to lay the shared memory out for, at start. */
export function chooseCapacities (limits: CapacityLimits, config: Needs): Capacities {
  const n = count(config)
  const pick = (k: keyof Capacities): number => limits[k] > 0 ? limits[k] : Math.max(DEFAULT_CAPACITIES[k], n[k] * AUTO_HEADROOM)
  return { services: pick('services'), servers: pick('servers'), routers: pick('routers') }
}

/**
 * Problems (one line each, naming the limit and its value) when `config` does
 * not fit `caps`. `chosen`: the capacities were chosen at start (a running
 * process), so the message says that a change needs a restart.
 */
export function capacityProblems (config: Needs, caps: Capacities, limits: CapacityLimits, chosen: boolean): string[] {
  const n = count(config)
  const out: string[] = []
  for (const k of ['services', 'servers', 'routers'] as const) {
    if (n[k] <= caps[k]) continue
    const setting = limits[k] > 0 ? String(limits[k]) : '"auto"'
    const how = chosen
      ? `room for ${caps[k]} ${k} in this process (limits.${k} = ${setting}, sized at start); raise limits.${k} and restart`
      : `at most ${caps[k]} ${k} (limits.${k} = ${setting}); raise limits.${k}`
    out.push(`limits.${k}: ${how}, but the configuration has ${n[k]}`)
  }
  if (config.entrypoints.length > MAX_ENTRYPOINTS) {
    out.push(`entrypoints: at most ${MAX_ENTRYPOINTS} entry points, but the configuration has ${config.entrypoints.length}`)
  }
  return out
}
