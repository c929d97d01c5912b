// Serialised, versioned writes of the config API. One write at a time:
// check the client's version (optimistic concurrency, as the Data Plane API),
// compute the new overlay, validate TOML + overlay as a whole config, persist
// the state file atomically, then apply it to every worker. A write is
// acknowledged only after it is durable and applied.
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import toml from 'toml'
import type { Table } from '../config/check.js'
import { type Config, buildConfig } from '../configure.js'
import { isLbError } from '../errors.js'
import type { Logger } from '../log.js'
import { type ApiState, applyState, readState, statePathFromRaw, writeState } from './state.js'

/** An API error, mapped to HTTP by the caller: {code, message} as the Data Plane API. */
export class ApiError extends Error {
  readonly status: number
  readonly code: number
  constructor (status: number, message: string, code = status) {
    super(message)
    this.status = status
    this.code = code
  }
}

/** What a change sees: the effective raw services (TOML + overlay) and the overlay to edit. */
export interface Draft {
  /** effective [services] tables by name (copies: edit freely) */
  readonly services: Record<string, Table>
  /** marks a backend as written by the API (table) or deleted (null) */
  set (name: string, table: Table | null): void
}

export class ConfigStore {
  readonly #file: string
  readonly #apply: (c: Config) => Promise<string[]>
  readonly #fits: (c: Config) => string[]
  readonly #log: Logger
  readonly #path: string
  #state: ApiState
  #queue: Promise<unknown> = Promise.resolve()

  constructor (configPath: string, apply: (c: Config) => Promise<string[]>, fits: (c: Config) => string[], log: Logger) {
    this.#file = resolve(configPath)
    this.#apply = apply
    this.#fits = fits
    this.#log = log
    const raw = this.#readToml()
    this.#path = statePathFromRaw(raw, this.#file)
    this.#state = readState(this.#path)
  }

  get version (): number { return this.#state.version }
  /** names of backends the API owns (created or replaced through it) */
  apiOwned (name: string): boolean { return this.#state.backends[name] != null }

  #readToml (): Table {
    let text: string
    try {
      text = readFileSync(this.#file, 'utf8')
    } catch (err) {
      throw new ApiError(500, `cannot read ${this.#file}: ${(err as Error).message}`)
    }
    try {
      return toml.parse(text) as Table
    } catch (err) {
      throw new ApiError(500, `${this.#file} has a TOML syntax error; fix it before changing the configuration through the API: ${(err as Error).message}`)
    }
  }

  /**
   * Runs `change` on a draft of `current` (the TOML re-read, the overlay
   * applied): the change's own ApiErrors (missing object, exists, schema)
   * come out of here, nothing else is checked yet.
   */
  #stage (current: ApiState, change: (d: Draft) => void): { raw: Table, next: ApiState } {
    const raw = this.#readToml()
    const tomlServices = (typeof raw.services === 'object' && raw.services !== null ? raw.services : {}) as Table
    const effective = applyState(raw, current) as Table
    const services = structuredClone((effective.services ?? {}) as Record<string, Table>)
    const backends: Record<string, Table | null> = { ...current.backends }
    const draft: Draft = {
      services,
      set: (name, table) => {
        if (table === null) {
          delete services[name]
          if (Object.hasOwn(tomlServices, name)) backends[name] = null
          else delete backends[name]
        } else {
          services[name] = table
          backends[name] = table
        }
      },
    }
    change(draft)
    return { raw, next: { version: current.version + 1, backends } }
  }

  /** The whole configuration `next` makes, validated, capacities included; an ApiError 400 "validation error" naming every problem otherwise. */
  #validate (raw: Table, next: ApiState): Config {
    let config: Config
    try {
      config = buildConfig(applyState(raw, next), this.#file)
    } catch (err) {
      if (!isLbError(err)) throw err
      const detail = err.message.split('\n').slice(1).map((l) => l.replace(/^\s*[^:]+: /, '').trim()).join('; ')
      throw new ApiError(400, `validation error: ${detail !== '' ? detail : err.message}`)
    }
    const over = this.#fits(config)
    if (over.length > 0) throw new ApiError(400, `validation error: ${over.join('; ')}`)
    return config
  }

  /**
   * What `change` would make of the current state, without writing or
   * applying anything (a transaction's view). Throws the change's own
   * ApiErrors; a configuration that does not validate as a whole is
   * returned as `invalid` (the ApiError update() would answer), not thrown.
   * No lock needed: #state is replaced whole, never edited in place.
   */
  preview (change: (d: Draft) => void): { config: Config } | { invalid: ApiError } {
    const { raw, next } = this.#stage(this.#state, change)
    try {
      return { config: this.#validate(raw, next) }
    } catch (err) {
      if (err instanceof ApiError) return { invalid: err }
      throw err
    }
  }

  /**
   * Runs `change` under the write lock. `version` (when given) must equal the
   * current one. Resolves with the new version once the new configuration is
   * persisted and applied; rejects with an ApiError otherwise.
   */
  update (version: number | undefined, change: (d: Draft) => void): Promise<{ version: number }> {
    const run = this.#queue.then(async () => {
      const current = this.#state
      if (version !== undefined && version !== current.version) {
        throw new ApiError(409, `version mismatch: version in configuration file is ${current.version}, given version is ${version}`)
      }
      const { raw, next } = this.#stage(current, change)
      // validated completely, capacities included, before anything is written: a write the workers cannot take never reaches the disk
      const config = this.#validate(raw, next)
      writeState(this.#path, next)
      this.#state = next
      let errors: string[]
      try {
        errors = await this.#apply(config)
      } catch (err) {
        // not applied anywhere: put the previous state back so disk and workers agree
        writeState(this.#path, current)
        this.#state = current
        throw new ApiError(500, `the configuration could not be applied: ${(err as Error).message}`)
      }
      if (errors.length > 0) this.#log.error('config API change rejected by some workers', { errors })
      return { version: next.version }
    })
    this.#queue = run.catch(() => undefined)
    return run
  }
}
