// What the management surfaces see of the running balancer (core/main.ts
// Running plus a few facts of their own). They read the applied config and
// shared memory; they change things only through apply() (config) or the shm
// server words (the runtime socket's commands and the config API's
// runtime/servers), never by messaging workers themselves.
import type { AdminCore } from './core.js'
import type { GenStats } from '../gen/stats.js'
import type { Sampler } from './sampler.js'

export type { AdminCore } from './core.js'

export interface AdminContext extends AdminCore {
  /** per-second rates, peaks and the dashboard history (core/admin/sampler.ts) */
  readonly sampler: Sampler
  /** The generation service's stats() once it is attached (Management.attachGen), else null: [generation] is off. */
  readonly gen: () => GenStats | null
}

export const VERSION = '0.1.0'
/** HAProxy's Release_date ("Date of latest source code update") of this VERSION, in HAProxy's YYYY/MM/DD form */
export const RELEASE_DATE = '2026/11/24'
