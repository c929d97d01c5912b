// Start-up with the config API's state file: a state file is never a dead
// end. When the TOML with the state applied is not a valid configuration (the
// file is damaged, or it no longer fits the TOML or a limit), lb starts from
// the TOML alone, moves the state file aside (it is kept, not deleted) and
// says so in one log line naming the file, the reason and what to do. Temp
// files of writes a kill -9 interrupted (`<state>.tmp-<pid>`) are removed.
import { readdirSync, renameSync, unlinkSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { type Config, loadConfigAsync } from '../../configure.js'
import { type ApiState, EMPTY_STATE, apiStateOverlay, readState, writeState } from './state.js'

/** What start-up has to say once the logger exists (it is configured by the Config). */
export interface StartNotes {
  readonly error: Record<string, unknown> | null
  readonly removedTemps: readonly string[]
}

export async function loadStartConfig (configPath: string): Promise<{ config: Config, notes: StartNotes }> {
  let first: unknown
  try {
    const config = await loadConfigAsync(configPath, apiStateOverlay)
    return { config, notes: { error: null, removedTemps: removeStaleTemps(config.admin.stateFile) } }
  } catch (err) {
    first = err
  }
  // the TOML alone: if it fails too, the TOML is at fault and its own error is the one to report
  const config = await loadConfigAsync(configPath)
  const file = config.admin.stateFile
  const removedTemps = removeStaleTemps(file)
  let old: ApiState = EMPTY_STATE
  try { old = readState(file) } catch { /* unreadable: its version is lost too */ }
  const aside = `${file}.bad-${new Date().toISOString().replace(/[:.]/g, '-')}`
  renameSync(file, aside)
  // Alone, the next API write must not reuse a version number clients have
  // seen. In a cluster the version is the cluster's, kept in Redis: the state
  // of no API write (version 1) makes this node take the cluster's state when
  // it reaches Redis. A higher version would be put in Redis as the newest,
  // and every node would take the empty state and drop the API's backends.
  writeState(file, config.cluster === null ? { version: old.version + 1, backends: {} } : EMPTY_STATE)
  const reason = (first as Error).message.replace(/\s*\n\s*/g, '; ')
  const error = {
    file,
    reason,
    moved_to: aside,
    action: `lb runs from ${config.file} alone; the changes in ${aside} are not applied: re-apply them through the config API (or fix the file, move it back and restart)`,
  }
  return { config, notes: { error, removedTemps } }
}

/** Removes `<state>.tmp-<pid>` files left by writes that were interrupted (this process has written none yet). */
function removeStaleTemps (stateFile: string): string[] {
  const dir = dirname(stateFile)
  const prefix = basename(stateFile) + '.tmp-'
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return []
  }
  const removed: string[] = []
  for (const name of names) {
    if (!name.startsWith(prefix) || !/^\d+$/.test(name.slice(prefix.length))) continue
    try {
      unlinkSync(join(dir, name))
      removed.push(name)
    } catch { /* gone already */ }
  }
  return removed
}
