// Serialised, versioned writes of the config API. One write at a time:
// check the client's version (optimistic concurrency, as the Data Plane API),
// compute the new overlay, validate TOML + overlay as a whole config, persist
// the state file atomically, then apply it to every worker. A write is
// acknowledged only after it is durable and applied.
//
// In cluster mode (core/cluster/shared-config.ts) the version is the cluster's:
// a write first catches up with Redis, then commits there with compare-and-set
// before it is written locally, so the same version written on two nodes
// succeeds once (the other gets 409). Writes of other nodes are pulled in and
// applied here (#pull); the state file stays this node's local copy, from
// which it starts when Redis is down. A write while Redis does not answer is
// refused with 503: the cluster's version cannot be checked.
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import toml from 'toml'
import type { Table } from '../../config/check.js'
import { type Config, buildConfig } from '../../configure.js'
import { type LbError, isLbError } from '../../errors.js'
import type { PreparedFile } from '../../atomic-file.js'
import type { Logger } from '../../log.js'
import { type ApiState, applyState, parseState, prepareState, readState, stateText, statePathFromRaw, writeState } from './state.js'
import type { SharedConfig } from '../../cluster/shared-config.js'

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

/** A state file that cannot be written: 507 for a full disk or quota, else 500; the message names the file and the cause. */
function writeFailure (err: LbError): ApiError {
  return new ApiError(err.status, `${err.message}; the configuration was not changed`)
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
  readonly #shared: SharedConfig | null
  #pulling = false
  /** a cluster version this node could not apply (logged once, not at every poll) */
  #refused = 0

  constructor (configPath: string, apply: (c: Config) => Promise<string[]>, fits: (c: Config) => string[], log: Logger, shared: SharedConfig | null = null) {
    this.#file = resolve(configPath)
    this.#apply = apply
    this.#fits = fits
    this.#log = log
    const raw = this.#readToml()
    this.#path = statePathFromRaw(raw, this.#file)
    this.#state = readState(this.#path)
    this.#shared = shared
    shared?.watch(() => { this.#pull() })
  }

  /** Catches up with the cluster's state (another node's write), or seeds Redis with this node's when it has an older one. */
  #pull (): void {
    const shared = this.#shared
    if (shared === null || this.#pulling) return
    this.#pulling = true
    const run = this.#queue.then(async () => {
      const remote = await shared.read()
      const local = this.#state
      if (remote === null || remote.version < local.version) await shared.seed({ version: local.version, text: stateText(local) })
      else if (remote.version > local.version) await this.#adopt(remote.version, remote.text)
    }).finally(() => { this.#pulling = false })
    this.#queue = run.catch(() => undefined)
  }

  /** Applies the cluster's state `text` (version `version`) here: validated against this node's TOML, written locally, applied. */
  async #adopt (version: number, text: string): Promise<void> {
    let config: Config
    let state: ApiState
    try {
      state = parseState(text, 'the cluster state in Redis')
      config = buildConfig(applyState(this.#readToml(), state), this.#file)
      const over = this.#fits(config)
      if (over.length > 0) throw new Error(over.join('; '))
    } catch (err) {
      if (this.#refused !== version) this.#log.error('cluster: the configuration version written by another node cannot be applied on this node; this node stays on its own', { version, local_version: this.#state.version, error: (err as Error).message })
      this.#refused = version
      return
    }
    // not applied (thrown): the next poll tries again
    const errors = await this.#install(state, config)
    if (errors.length > 0) this.#log.error('cluster configuration rejected by some workers', { errors })
    this.#log.info('cluster: configuration of the cluster applied', { version })
  }

  /**
   * Makes `state` (whose configuration is `config`) this node's: written to
   * disk, applied to the workers, then the state readers see. The version
   * changes with the running configuration, never before it: apply() swaps
   * the configuration in its last synchronous step, and only microtasks run
   * between it and the assignment here. (Set before the apply, a GET in
   * between answered the new version with the old configuration.) When the
   * apply throws, nothing ran: the disk gets the previous state back.
   */
  async #install (state: ApiState, config: Config, staged: PreparedFile = prepareState(this.#path, state)): Promise<string[]> {
    staged.commit()
    let errors: string[]
    try {
      errors = await this.#apply(config)
    } catch (err) {
      try {
        writeState(this.#path, this.#state)
      } catch (back) {
        this.#log.error('the config API state file could not be rolled back: it holds a change that was not applied', { file: this.#path, error: (back as Error).message })
      }
      throw err
    }
    this.#state = state
    return errors
  }

  /** The cluster's version, caught up with first; a Redis that does not answer is a 503. */
  async #catchUp (shared: SharedConfig): Promise<void> {
    let remote
    try {
      remote = await shared.read()
    } catch (err) {
      throw new ApiError(503, `the cluster's configuration lives in Redis, which does not answer (${(err as Error).message}); retry when it is back`)
    }
    if (remote !== null && remote.version > this.#state.version) await this.#adopt(remote.version, remote.text)
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
      if (this.#shared !== null) await this.#catchUp(this.#shared)
      const current = this.#state
      if (version !== undefined && version !== current.version) {
        throw new ApiError(409, `version mismatch: version in configuration file is ${current.version}, given version is ${version}`)
      }
      const { raw, next } = this.#stage(current, change)
      // validated completely, capacities included, before anything is written: a write the workers cannot take never reaches the disk
      const config = this.#validate(raw, next)
      // the state file is written (beside the old one) before anything changes, in Redis or here:
      // a full disk refuses the write with nothing changed, and the old file stays whole
      let staged: PreparedFile
      try {
        staged = prepareState(this.#path, next)
      } catch (err) {
        if (isLbError(err)) throw writeFailure(err)
        throw err
      }
      try {
        if (this.#shared !== null) await this.#commit(this.#shared, current.version, next)
      } catch (err) {
        staged.abort()
        throw err
      }
      let errors: string[]
      try {
        errors = await this.#install(next, config, staged)
      } catch (err) {
        if (isLbError(err) && (err.code === 'LB_ERR_NO_SPACE' || err.code === 'LB_ERR_WRITE')) throw writeFailure(err)
        throw new ApiError(500, `the configuration could not be applied: ${(err as Error).message}`)
      }
      if (errors.length > 0) this.#log.error('config API change rejected by some workers', { errors })
      return { version: next.version }
    })
    this.#queue = run.catch(() => undefined)
    return run
  }

  /** Compare-and-set in Redis: the one step that makes `next` the cluster's version. */
  async #commit (shared: SharedConfig, expected: number, next: ApiState): Promise<void> {
    let ok: boolean
    try {
      ok = await shared.commit(expected, { version: next.version, text: stateText(next) })
    } catch (err) {
      // A reply that timed out does not say the write was not made: Redis may
      // have run it and answered late. The next poll adopts it if so.
      throw new ApiError(503, `the cluster's configuration lives in Redis, which did not answer the write in time (${(err as Error).message}); it may have been stored all the same, and then every node applies it: read the version before writing again`)
    }
    if (!ok) throw new ApiError(409, `version mismatch: another node changed the configuration first; version ${expected} is outdated`)
  }
}
