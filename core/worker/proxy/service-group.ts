// A `weighted` or `failover` service at run time (core/config/service-group.ts):
// which of its services takes a request. Weighted is smooth weighted round
// robin (nginx's) in each worker, over the services that have a server up:
// with two workers the shares hold over each worker's requests, not per
// request across workers (Traefik keeps its own per instance). Failover asks
// whether the main service has a usable server right now (shared memory).
import type { ServiceGroup } from '../../config/service-group.js'
import { isUsable } from '../../shm/server-state.js'
import type { RouteTarget, ServiceGroupRuntime, ServiceRuntime } from '../runtime.js'

/** A service that could take a request now: a group, or a service with a usable server. */
function usable (svc: ServiceRuntime, i32: Int32Array, t: number): boolean {
  if (svc.group !== null) return true
  for (const s of svc.servers) if (isUsable(i32, s.slot, t)) return true
  return false
}

export class GroupRuntime implements ServiceGroupRuntime {
  readonly conf: ServiceGroup
  /** resolved once every service of the generation is built (link): weighted's services; failover's main and fallback; mirroring's main then mirrors */
  #children: ServiceRuntime[] = []
  readonly #weights: number[]
  /** weighted: smooth weighted round robin's current weights; mirroring: copies sent per mirror */
  readonly #current: number[]
  /** mirroring: requests seen */
  #seen = 0

  constructor (conf: ServiceGroup) {
    this.conf = conf
    this.#weights = conf.kind === 'weighted' ? conf.services.map((s) => s.weight) : conf.kind === 'failover' ? [1, 0] : conf.mirrors.map((m) => m.percent)
    this.#current = this.#weights.map(() => 0)
  }

  link (byName: ReadonlyMap<string, ServiceRuntime>): void {
    const c = this.conf
    const names = c.kind === 'weighted' ? c.services.map((s) => s.name) : c.kind === 'failover' ? [c.service, c.fallback] : [c.service, ...c.mirrors.map((m) => m.name)]
    this.#children = names.map((n) => byName.get(n)!) // the config checked they exist
  }

  pick (i32: Int32Array, t: number): ServiceRuntime {
    const ch = this.#children
    if (this.conf.kind === 'mirroring') return ch[0]!
    if (this.conf.kind === 'failover') return usable(ch[0]!, i32, t) ? ch[0]! : ch[1]!
    let best = this.#swrr(i32, t, true)
    if (best < 0) best = this.#swrr(i32, t, false) // none has a server up: its own error answers
    return ch[best]!
  }

  /**
   * Mirroring: the mirrors that get a copy of this request, each for `percent` of the requests, spread
   * evenly (a copy whenever its count falls behind percent of the requests seen, as Traefik counts); null for none.
   */
  mirrorsFor (): ServiceRuntime[] | null {
    if (this.conf.kind !== 'mirroring') return null
    const seen = ++this.#seen
    let out: ServiceRuntime[] | null = null
    for (let i = 0; i < this.#weights.length; i++) {
      if (this.#current[i]! * 100 >= seen * this.#weights[i]!) continue
      this.#current[i]!++
      ;(out ??= []).push(this.#children[i + 1]!)
    }
    return out
  }

  #swrr (i32: Int32Array, t: number, onlyUsable: boolean): number {
    const w = this.#weights
    const cur = this.#current
    let total = 0
    let best = -1
    for (let i = 0; i < w.length; i++) {
      if (w[i] === 0 || (onlyUsable && !usable(this.#children[i]!, i32, t))) continue
      cur[i]! += w[i]!
      total += w[i]!
      if (best < 0 || cur[i]! > cur[best]!) best = i
    }
    if (best >= 0) cur[best]! -= total
    return best
  }
}

/** The route target of `target` with its group service resolved to `svc` (one object per pair, made once). */
export function leafTarget (target: RouteTarget, svc: ServiceRuntime): RouteTarget {
  let t = target.leaves!.get(svc)
  if (t === undefined) {
    t = { service: svc, chain: target.chain, routerSlot: target.routerSlot, leaves: null }
    target.leaves!.set(svc, t)
  }
  return t
}
