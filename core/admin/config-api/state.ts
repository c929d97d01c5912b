// The config API's state file: backends created, replaced or deleted through
// the API, and the configuration version. The hand-written TOML is never
// rewritten; the effective configuration is the TOML with this overlay applied
// to the parsed tables BEFORE validation (at start-up and on every reload).
//
// Writes are atomic and durable: write a temp file in the same folder, fsync
// it, rename it over the old one, fsync the folder. A kill -9 at any moment
// leaves either the old or the new file, never a torn one, and a write is
// acknowledged to the client only after its rename is durable.
import { readFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { DEFAULTS } from '../../config/defaults.js'
import { type Table, resolvePath } from '../../config/check.js'
import { lbError } from '../../errors.js'
import { type PreparedFile, prepareFileAtomic, writeFileAtomic } from '../../atomic-file.js'

export const STATE_FORMAT = 1

export interface ApiState {
  /** configuration version: 1 before any API write, +1 per successful write */
  readonly version: number
  /** raw [services.NAME] tables written by the API; null = a TOML backend deleted through the API */
  readonly backends: Readonly<Record<string, Table | null>>
}

export const EMPTY_STATE: ApiState = { version: 1, backends: {} }

const isTable = (v: unknown): v is Table => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Where the state file of the config at `file` lives, from the raw (unvalidated) tables, with the same defaults as validation. */
export function statePathFromRaw (raw: unknown, file: string): string {
  const baseDir = file === '' ? process.cwd() : dirname(file)
  const g = isTable(raw) && isTable(raw.global) ? raw.global : {}
  const a = isTable(raw) && isTable(raw.admin) ? raw.admin : {}
  const sd = typeof g.state_dir === 'string' ? g.state_dir : DEFAULTS.global.stateDir
  const stateDir = resolvePath(baseDir, sd)
  const sf = typeof a.state_file === 'string' ? a.state_file : DEFAULTS.admin.stateFile
  return resolvePath(stateDir, sf)
}

/** Reads the state file; a missing file is the empty state, a damaged one an error (never silently dropped). */
export function readState (path: string): ApiState {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return EMPTY_STATE
    throw lbError('LB_ERR_ADMIN_STATE', { file: path, reason: (err as Error).message })
  }
  return parseState(text, path)
}

/** A state from its JSON text (the state file's format); `source` names where it came from in the error. */
export function parseState (text: string, source: string): ApiState {
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch (err) {
    throw lbError('LB_ERR_ADMIN_STATE', { file: source, reason: (err as Error).message })
  }
  if (!isTable(v) || v.format !== STATE_FORMAT || !Number.isInteger(v.version) || !isTable(v.backends) ||
    Object.values(v.backends).some((b) => b !== null && !isTable(b))) {
    throw lbError('LB_ERR_ADMIN_STATE', { file: source, reason: `not a format ${STATE_FORMAT} state file` })
  }
  return { version: v.version as number, backends: v.backends as Record<string, Table | null> }
}

/** Atomically replaces the state file (see the header comment). Throws LB_ERR_NO_SPACE / LB_ERR_WRITE, the file unchanged. */
export function writeState (path: string, state: ApiState): void {
  writeFileAtomic(path, stateText(state))
}

/** The state file's new contents written beside it and synced, to be renamed into place (commit) or dropped (abort). */
export function prepareState (path: string, state: ApiState): PreparedFile {
  return prepareFileAtomic(path, stateText(state))
}

/** The JSON text of a state (the state file's, and the cluster's in Redis). */
export function stateText (state: ApiState): string {
  return JSON.stringify({ format: STATE_FORMAT, version: state.version, backends: state.backends }, null, 2) + '\n'
}

/** The parsed TOML with `state` applied: API backends replace or remove [services.NAME]. */
export function applyState (raw: unknown, state: ApiState): unknown {
  if (!isTable(raw) || Object.keys(state.backends).length === 0) return raw
  const services: Table = isTable(raw.services) ? { ...raw.services } : {}
  for (const [name, table] of Object.entries(state.backends)) {
    if (table === null) delete services[name]
    else services[name] = table
  }
  return { ...raw, services }
}

/** The RawOverlay used by loadConfig: reads the state file next to the config and applies it. */
export function apiStateOverlay (raw: unknown, file: string): unknown {
  return applyState(raw, readState(statePathFromRaw(raw, file)))
}
