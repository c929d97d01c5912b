// The remote model servers of [[generation.servers]], their models, and the
// choice of a server for a request (choice.ts) among the servers that are up
// and list the model. Aliases map a requested name to the
// served one; fallbacks are the names tried next when no server could start
// the reply (dispatch/generation.ts decides local vs remote, remote/run.ts
// tries the chain).

import type { GenerationConf } from '../../config/generation.js'
import type { Logger } from '../../log.js'
import type { ModelSlots } from '../../shm/model-inflight.js'
import type { RemoteListing } from '../edge/messages.js'
import { modelChain, resolveAlias } from './chain.js'
import { chooseServer } from './choice.js'
import { type RemoteModel, RemoteServer } from './server.js'

/** How often a server never reached yet is asked again: ms. */
const FIRST_RETRY_MS = 1_000

export class RemoteRegistry {
  readonly servers: readonly RemoteServer[]
  /** The shared memory's in-flight counts (null: each server counts in this process). */
  readonly slots: ModelSlots | null
  private readonly aliases: Readonly<Record<string, string>>
  private readonly fallbacks: Readonly<Record<string, readonly string[]>>
  private readonly timers: NodeJS.Timeout[] = []
  private first: Promise<void> | null = null
  /** Rotates the start of the search among equals, so that equal servers share the requests. */
  private turn = 0

  /** Told the servers' listing whenever it changed (a model added or gone, a server up or down): the workers' snapshot. */
  onListing: ((l: RemoteListing) => void) | null = null
  /** The models the service has on this machine (its catalog's names), for the listing. */
  localModels: () => readonly string[] = () => []
  #lastListing = ''

  /** `slots`: the shared memory's in-flight counts (null: counted in this process; the workers then always ask). */
  constructor (conf: GenerationConf, log: Logger, slots: ModelSlots | null = null) {
    this.slots = slots
    this.servers = conf.servers.map((s) => new RemoteServer(s, log, slots))
    this.aliases = conf.aliases
    this.fallbacks = conf.fallbacks
    for (const s of this.servers) s.onChange = () => this.changed()
  }

  /**
   * Which server lists which models (canonical names), whether it is up and has them loaded, and how to call it.
   * The local names are as the catalog knows them now: a local model added later under a remote one's name is
   * seen by the workers at the next listing change or refresh (the control plane's own check peeks the same catalog).
   */
  listing (): RemoteListing {
    return {
      servers: this.servers.map((s) => {
        const models = [...s.models.keys()]
        return {
          name: s.conf.name,
          up: s.up,
          models,
          served: models.map((m) => s.models.get(m)!.served),
          loaded: models.map((m) => s.isLoaded(m)),
          slots: models.map((m) => s.slot(m)),
          call: { name: s.conf.name, kind: s.conf.kind, url: s.conf.url, headers: s.headers() },
        }
      }),
      local: [...this.localModels()].sort(),
    }
  }

  /** Something the listing shows may have changed: the workers are sent it when it did. */
  changed (): void {
    if (this.onListing === null) return
    const l = this.listing()
    const text = JSON.stringify(l)
    if (text === this.#lastListing) return
    this.#lastListing = text
    this.onListing(l)
  }

  /**
   * Reads every server's models now, then every `refresh`; a server never reached yet (lb starting beside
   * it) is asked again every second until it answers, so that it does not wait a whole period to be used.
   */
  start (): void {
    this.first = Promise.all(this.servers.map((s) => s.refresh())).then(() => undefined)
    for (const s of this.servers) {
      const t = setInterval(() => { void s.refresh() }, s.conf.refreshMs)
      t.unref()
      this.timers.push(t)
      if (s.conf.refreshMs <= FIRST_RETRY_MS) continue
      const first = setInterval(() => {
        if (s.reached) clearInterval(first)
        else void s.refresh()
      }, FIRST_RETRY_MS)
      first.unref()
      this.timers.push(first)
    }
  }

  /** Resolves once every server was asked once (so that the first requests after a start see the servers' models). */
  ready (): Promise<void> { return this.first ?? Promise.resolve() }

  close (): void {
    for (const t of this.timers) clearInterval(t)
    this.timers.length = 0
  }

  /** The name served for a requested one (an alias' target, else the name itself). */
  resolve (model: string): string {
    return resolveAlias(this.aliases, model)
  }

  /** The requested model and its fallbacks, in the order they are tried (each alias resolved, none twice). */
  chain (model: string): string[] {
    return modelChain(this.aliases, this.fallbacks, model)
  }

  /** Some server lists the model (up or not). */
  knows (model: string): boolean {
    return this.servers.some((s) => s.models.has(model))
  }

  /** The server to ask for `model` next, not one of `tried`; null when no server that is up lists it. */
  pick (model: string, tried: ReadonlySet<RemoteServer>): RemoteServer | null {
    const all = this.servers
    const n = all.length
    const i = chooseServer(n, this.turn++ % Math.max(1, n), (i) => all[i]!.up && !tried.has(all[i]!) && all[i]!.models.has(model),
      (i) => all[i]!.isLoaded(model), (i) => all[i]!.requests(model))
    return i < 0 ? null : all[i]!
  }

  /** A server listing `model` (the first up one, else any), for /api/show and /v1/models/{id}. */
  find (model: string): { server: RemoteServer, model: RemoteModel } | null {
    let found: { server: RemoteServer, model: RemoteModel } | null = null
    for (const s of this.servers) {
      const m = s.models.get(model)
      if (m === undefined) continue
      if (s.up) return { server: s, model: m }
      found ??= { server: s, model: m }
    }
    return found
  }

  /** Every model the servers list, once each (the first server's entry), by canonical name. */
  models (): Map<string, { server: RemoteServer, model: RemoteModel }> {
    const out = new Map<string, { server: RemoteServer, model: RemoteModel }>()
    for (const s of this.servers) {
      for (const [name, m] of s.models) if (!out.has(name)) out.set(name, { server: s, model: m })
    }
    return out
  }

  /** The aliases whose target some server lists: alias -> target. */
  servedAliases (): Array<[string, string]> {
    return Object.entries(this.aliases).filter(([, to]) => this.knows(to))
  }
}
