// Transactions of the config API, as the Data Plane API has them: a client
// opens one on the current version (POST /transactions?version=N), stages
// writes in it (?transaction_id=ID, answered 202), reads through it (the
// configuration as the transaction would leave it) and commits it
// (PUT /transactions/ID) or drops it (DELETE).
//
// A transaction is the list of the write handlers' changes, replayed in order
// on a draft of the current state. Commit is ONE ConfigStore.update() on the
// transaction's base version with every change in it: validated whole, written
// once (one state file rename, so a kill -9 leaves all or nothing) and applied,
// one version step. A transaction based on an older version than the current
// one is outdated (406), never rebased: its changes were checked against a
// configuration that no longer exists. Reads and writes through it get the
// same 406, so no read shows the current configuration under its old version.
//
// Invariants: changes are pure functions of the draft (they capture the
// request's parsed body, nothing live), so a replay gives what the staged
// writes saw; only transactions in progress count against the cap; the
// transactions live in memory (a restart drops the open ones).
import { randomUUID } from 'node:crypto'
import type { Config } from '../../configure.js'
import { ApiError, type ConfigStore, type Draft } from './config-store.js'

export type Change = (d: Draft) => void

/** The Data Plane API's transaction statuses; `success` is only ever answered (a committed transaction is gone). */
export const TX_STATUSES = ['in_progress', 'success', 'failed', 'outdated'] as const
export type TxStatus = typeof TX_STATUSES[number]

/** The Data Plane API's transaction model. */
export interface TransactionModel {
  readonly id: string
  readonly _version: number
  readonly status: TxStatus
}

interface Tx {
  readonly id: string
  /** the configuration version the transaction was opened on */
  readonly version: number
  status: TxStatus
  readonly changes: Change[]
  /** true while its commit runs: it takes no more changes and cannot be dropped */
  committing: boolean
}

/** What a read through a transaction sees: its configuration (null when it does not validate as a whole) and its version. */
export interface TxView {
  readonly config: Config | null
  /** why config is null: the 400 a commit would answer now */
  readonly invalid: ApiError | null
  readonly version: number
}

const model = (t: Tx): TransactionModel => ({ id: t.id, _version: t.version, status: t.status })

export class Transactions {
  readonly #store: ConfigStore
  readonly #max: number
  readonly #maxChanges: number
  /** insertion order = age: the oldest finished ones are forgotten first */
  readonly #txs = new Map<string, Tx>()

  /** `max`: transactions in progress at once ([admin] max_open_transactions); `maxChanges`: changes one may stage */
  constructor (store: ConfigStore, max: number, maxChanges: number) {
    this.#store = store
    this.#max = max
    this.#maxChanges = maxChanges
  }

  #open (): number {
    let n = 0
    for (const t of this.#txs.values()) if (t.status === 'in_progress') n++
    return n
  }

  /** 404 for the /transactions/{id} routes */
  #find (id: string): Tx {
    const t = this.#txs.get(id)
    if (t === undefined) throw new ApiError(404, `missing object: transaction ${id} does not exist`)
    return t
  }

  /** for writes and reads with ?transaction_id: an unknown one is a 400 (client-native's "transaction does not exist") */
  #staging (id: string): Tx {
    const t = this.#txs.get(id)
    if (t === undefined) throw new ApiError(400, `transaction does not exist: transaction ${id} does not exist`)
    if (t.status !== 'in_progress') throw new ApiError(400, `transaction ${id} is ${t.status}: only a transaction in progress can be read or changed; start a new one`)
    if (t.committing) throw new ApiError(409, `transaction ${id} is being committed: it takes no more changes`)
    // a write since it opened: its reads would show a configuration it cannot commit (the Data Plane API's outdated)
    if (t.version !== this.#store.version) {
      t.status = 'outdated'
      throw this.#outdated(t)
    }
    return t
  }

  start (version: number): TransactionModel {
    if (version !== this.#store.version) {
      throw new ApiError(409, `version mismatch: version in configuration file is ${this.#store.version}, given version is ${version}`)
    }
    const open = this.#open()
    if (open >= this.#max) {
      throw new ApiError(429, `Too many open transactions: ${open} are in progress, the limit is ${this.#max} ([admin] max_open_transactions); commit or delete one first`)
    }
    // finished (failed, outdated) ones are kept to be read, but no more of them than the cap
    for (const t of this.#txs.values()) {
      if (this.#txs.size - open <= this.#max) break
      if (t.status !== 'in_progress') this.#txs.delete(t.id)
    }
    const t: Tx = { id: randomUUID(), version, status: 'in_progress', changes: [], committing: false }
    this.#txs.set(t.id, t)
    return model(t)
  }

  get (id: string): TransactionModel { return model(this.#find(id)) }

  list (status: TxStatus | null): TransactionModel[] {
    return [...this.#txs.values()].filter((t) => status === null || t.status === status).map(model)
  }

  /** `t`'s configuration with `changes` replayed (the change's own ApiErrors are thrown) */
  #view (t: Tx, changes: readonly Change[]): TxView {
    const p = this.#store.preview((d) => { for (const c of changes) c(d) })
    return 'config' in p ? { config: p.config, invalid: null, version: t.version } : { config: null, invalid: p.invalid, version: t.version }
  }

  /** The configuration as transaction `id` would leave it. */
  view (id: string): TxView {
    const t = this.#staging(id)
    return this.#view(t, t.changes)
  }

  /**
   * Stages `change` in transaction `id`. The change runs at once on the
   * transaction's draft, so a missing or duplicate object or a schema
   * violation is answered now and not recorded; whether the configuration
   * validates as a whole is decided at commit, as the Data Plane API does.
   */
  record (id: string, change: Change): TxView {
    const t = this.#staging(id)
    if (t.changes.length >= this.#maxChanges) {
      throw new ApiError(400, `transaction ${id} holds ${t.changes.length} changes, the most one may ([admin] max_transaction_changes): commit it and start another`)
    }
    const v = this.#view(t, [...t.changes, change])
    t.changes.push(change)
    return v
  }

  /**
   * Commits transaction `id`: all its changes as one versioned write, or
   * none. Resolves with the new version; rejects with 404 (unknown), 406
   * (outdated), 400 (failed, or it does not validate: then it is failed),
   * 507 (the state file cannot be written for want of space: it stays open).
   */
  async commit (id: string): Promise<{ model: TransactionModel, version: number }> {
    const t = this.#find(id)
    if (t.committing) throw new ApiError(409, `transaction ${id} is being committed`)
    if (t.status === 'outdated') throw this.#outdated(t)
    if (t.status === 'failed') throw new ApiError(400, `transaction ${id} has failed: it cannot be committed; start a new one`)
    if (t.version !== this.#store.version) {
      t.status = 'outdated'
      throw this.#outdated(t)
    }
    t.committing = true
    const changes = [...t.changes]
    try {
      const { version } = await this.#store.update(t.version, (d) => { for (const c of changes) c(d) })
      this.#txs.delete(id)
      return { model: { id, _version: version, status: 'success' }, version }
    } catch (err) {
      if (!(err instanceof ApiError)) throw err
      // a write that came in between the check above and the lock: the same refusal
      if (err.status === 409 && err.message.startsWith('version mismatch')) {
        t.status = 'outdated'
        throw this.#outdated(t)
      }
      if (err.status === 507) {
        // the disk is full, not the transaction wrong: it stays open, to be committed again once there is space
        throw new ApiError(507, `transaction ${id} was not committed, nothing was applied; it stays open: ${err.message}`)
      }
      t.status = 'failed'
      throw new ApiError(err.status, `transaction ${id} failed, nothing was applied: ${err.message}`, err.code)
    } finally {
      t.committing = false
    }
  }

  #outdated (t: Tx): ApiError {
    return new ApiError(406, `transaction ${t.id} is outdated: it was opened on version ${t.version}, the configuration is at version ${this.#store.version}; nothing was applied, start a new transaction`)
  }

  drop (id: string): void {
    const t = this.#find(id)
    if (t.committing) throw new ApiError(409, `transaction ${id} is being committed: it cannot be deleted`)
    this.#txs.delete(id)
  }
}
