// Assigns shared-memory slots to services and servers and keeps them stable
// across reloads (by service name and "service/server" name), so counters,
// health state and runtime changes (weight, drain, maint) survive a reload.
// A freed slot goes to the back of the free list, so it is reused as late as possible.
//
// apply() assigns the slots of a configuration the workers are about to get;
// readers (admin, metrics, health checks) look names up in the slots of the
// configuration running, which commit() swaps in together with it. Between
// the two, a removed server still has its (freed, not yet reused) slot, and a
// runtime change to it lands there instead of on whatever index an undefined
// slot makes (word 0: the layout's magic).
import type { Config } from '../config/load.js'
import type { Slots } from '../protocol.js'
import { clearServerCounters } from '../shm/counters.js'
import {
  type Shm, ADMIN_MAINT, ADMIN_READY, CHECK_UP, MAX_ROUTERS, MAX_SERVERS, MAX_SERVICES, S_ADMIN, S_CHECK, S_WEIGHT, SRV_WORDS, serverBase,
} from '../shm/layout.js'
import { clearRouterStats } from '../shm/request-stats.js'
import { bumpServiceState } from '../shm/server-state.js'

export class SlotRegistry {
  readonly #shm: Shm
  readonly #services = new Map<string, number>()
  readonly #servers = new Map<string, number>()
  /** weight each server had in the config last applied: a reload changes the live weight only if the config's changed */
  readonly #configWeight = new Map<string, number>()
  /** same for `maintenance`: runtime `enable/disable server` survive a reload unless the config's flag changed */
  readonly #configMaint = new Map<string, boolean>()
  readonly #routers = new Map<string, number>()
  readonly #freeRouters: number[] = Array.from({ length: MAX_ROUTERS }, (_, i) => i)
  readonly #freeServices: number[] = Array.from({ length: MAX_SERVICES }, (_, i) => i)
  readonly #freeServers: number[] = Array.from({ length: MAX_SERVERS }, (_, i) => i)

  /** the slots of the configuration running: what server(), service() and router() answer */
  #view = { services: new Map<string, number>(), servers: new Map<string, number>(), routers: new Map<string, number>() }

  constructor (shm: Shm) {
    this.#shm = shm
  }

  /** Makes `slots` (from apply()) what readers see; call it where the running configuration becomes the one they were assigned for. */
  commit (slots: Slots): void {
    this.#view = { services: new Map(Object.entries(slots.services)), servers: new Map(Object.entries(slots.servers)), routers: new Map(Object.entries(slots.routers)) }
  }

  /** Assigns slots for `config`, frees the slots of what it no longer has; throws when slots run out (capacityProblems checks first). */
  apply (config: Config): Slots {
    const i32 = this.#shm.i32
    const services: Record<string, number> = {}
    const servers: Record<string, number> = {}
    // free what the new config no longer has first: a config that replaces names within capacity must fit
    const svcNames = new Set(config.services.map((s) => s.name))
    const srvKeys = new Set(config.services.flatMap((s) => s.servers.map((srv) => `${s.name}/${srv.name}`)))
    const routerNames = new Set(config.routers.map((r) => r.name))
    for (const [name, s] of this.#services) if (!svcNames.has(name)) { this.#services.delete(name); this.#freeServices.push(s) }
    for (const [key, s] of this.#servers) if (!srvKeys.has(key)) { this.#servers.delete(key); this.#configWeight.delete(key); this.#configMaint.delete(key); this.#freeServers.push(s) }
    for (const [name, s] of this.#routers) if (!routerNames.has(name)) { this.#routers.delete(name); this.#freeRouters.push(s) }
    for (const svc of config.services) {
      let s = this.#services.get(svc.name)
      if (s === undefined) {
        s = this.#freeServices.shift()
        if (s === undefined) throw new Error(`more than ${MAX_SERVICES} services`)
        this.#services.set(svc.name, s)
      }
      services[svc.name] = s
      for (const srv of svc.servers) {
        const key = `${svc.name}/${srv.name}`
        let slot = this.#servers.get(key)
        if (slot === undefined) {
          slot = this.#freeServers.shift()
          if (slot === undefined) throw new Error(`more than ${MAX_SERVERS} servers`)
          this.#servers.set(key, slot)
          const b = serverBase(slot)
          i32.fill(0, b, b + SRV_WORDS)
          clearServerCounters(this.#shm, slot)
          Atomics.store(i32, b + S_ADMIN, srv.maintenance ? ADMIN_MAINT : ADMIN_READY)
          Atomics.store(i32, b + S_CHECK, CHECK_UP) // servers start UP, as HAProxy and Traefik; checks take them out
          Atomics.store(i32, b + S_WEIGHT, srv.weight)
        } else {
          if (this.#configWeight.get(key) !== srv.weight) Atomics.store(i32, serverBase(slot) + S_WEIGHT, srv.weight)
          if (this.#configMaint.get(key) !== srv.maintenance) Atomics.store(i32, serverBase(slot) + S_ADMIN, srv.maintenance ? ADMIN_MAINT : ADMIN_READY)
        }
        this.#configWeight.set(key, srv.weight)
        this.#configMaint.set(key, srv.maintenance)
        servers[key] = slot
      }
      bumpServiceState(i32, s)
    }
    const routers: Record<string, number> = {}
    for (const r of config.routers) {
      let s = this.#routers.get(r.name)
      if (s === undefined) {
        s = this.#freeRouters.shift()
        if (s === undefined) throw new Error(`more than ${MAX_ROUTERS} routers`)
        this.#routers.set(r.name, s)
        clearRouterStats(this.#shm, s)
      }
      routers[r.name] = s
    }
    return { services, servers, routers }
  }

  router (name: string): number | undefined {
    return this.#view.routers.get(name)
  }

  server (service: string, server: string): number | undefined {
    return this.#view.servers.get(`${service}/${server}`)
  }

  service (name: string): number | undefined {
    return this.#view.services.get(name)
  }
}
