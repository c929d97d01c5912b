// What the management surfaces see of the running balancer (core/main.ts
// Running plus a few facts of their own). They read the applied config and
// shared memory; they change things only through apply() (config) or the shm
// server words (the runtime socket's commands and the config API's
// runtime/servers), never by messaging workers themselves.
import type { Config } from '../config/load.js'
import type { SlotRegistry } from '../control/slots.js'
import type { Logger } from '../log.js'
import type { Shm } from '../shm/layout.js'
import type { ConfigStore } from './config-store.js'
import type { Sampler } from './sampler.js'

export interface AdminContext {
  readonly configPath: string
  readonly config: () => Config
  readonly generation: () => number
  readonly shm: Shm
  readonly slots: SlotRegistry
  readonly log: Logger
  readonly apply: (next: Config) => Promise<string[]>
  /** problems when `next` does not fit the shared memory's capacities (core/config/capacity.ts); empty = fits */
  readonly fits: (next: Config) => string[]
  /** process start, ms since the epoch */
  readonly startedAt: number
  readonly store: ConfigStore
  /** per-second rates, peaks and the dashboard history (core/admin/sampler.ts) */
  readonly sampler: Sampler
}

/** What the sampler and the server view need: the context before the sampler exists. */
export type AdminCore = Omit<AdminContext, 'sampler'>

export const VERSION = '0.1.0'
/** HAProxy's Release_date ("Date of latest source code update") of this VERSION, in HAProxy's YYYY/MM/DD form */
export const RELEASE_DATE = '2026/11/24'
