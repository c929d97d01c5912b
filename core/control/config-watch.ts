// Watches the file provider's directory (or file) and reloads when something
// there changes, as Traefik's `watch = true`: tools that write configuration
// files (configuration management, a sidecar) need no signal. The reload is
// the SIGHUP one: an invalid file keeps the running configuration, and the log
// says why. Events are gathered for DEBOUNCE_MS (an editor's save is several),
// then one reload runs; a change during a reload gets one more after it.
import { type FSWatcher, watch } from 'node:fs'
import { basename, dirname } from 'node:path'
import type { Config } from '../config/load.js'
import type { Logger } from '../log.js'

export const DEBOUNCE_MS = 200

export class ConfigWatch {
  readonly #reload: () => Promise<void>
  readonly #log: Logger
  #watcher: FSWatcher | null = null
  /** what is watched now: "dir\0file filter" ('' = nothing) */
  #key = ''
  #timer: NodeJS.Timeout | null = null
  #running: Promise<void> | null = null
  #again = false

  constructor (reload: () => Promise<void>, log: Logger) {
    this.#reload = reload
    this.#log = log
  }

  /** Watches what `conf` names (called at start and after every applied configuration). */
  update (conf: Config): void {
    const p = conf.providers
    const dir = p === null || !p.watch ? '' : p.filename !== '' ? dirname(p.filename) : p.directory
    const only = p !== null && p.filename !== '' ? basename(p.filename) : ''
    const key = dir === '' ? '' : `${dir}\0${only}`
    if (key === this.#key) return
    this.#stop()
    this.#key = key
    if (dir === '') return
    try {
      this.#watcher = watch(dir, (_event, name) => {
        if (only !== '' && name !== only) return
        if (only === '' && name !== null && !name.endsWith('.toml')) return
        this.#changed()
      })
      this.#watcher.on('error', (err) => this.#log.warn('providers.file: the watcher failed; reload with SIGHUP', { directory: dir, error: err.message }))
      this.#log.info('providers.file: watching for changes', { directory: dir, ...(only === '' ? {} : { filename: only }) })
    } catch (err) {
      this.#key = '' // tried again at the next applied configuration
      this.#log.warn('providers.file: cannot watch; reload with SIGHUP', { directory: dir, error: (err as Error).message })
    }
  }

  close (): void {
    this.#stop()
    this.#key = ''
  }

  #changed (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = setTimeout(() => {
      this.#timer = null
      if (this.#running !== null) {
        this.#again = true
        return
      }
      this.#log.info('providers.file: a file changed; reloading')
      this.#running = this.#reload().finally(() => {
        this.#running = null
        if (this.#again) {
          this.#again = false
          this.#changed()
        }
      })
    }, DEBOUNCE_MS)
  }

  #stop (): void {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    this.#watcher?.close()
    this.#watcher = null
  }
}
