// Traefik's file provider: [providers.file] names a directory (or one file) of
// dynamic configuration, [routers], [services] and [middlewares] in TOML, merged
// into the main file's before validation. Each file is read whole at every load
// (start, SIGHUP, a change seen by the watcher, core/control/config-watch.ts);
// a name defined twice is refused naming both files, and a problem in a
// provider file names that file. Everything else stays in the main file.
import { readdirSync } from 'node:fs'
import { join as joinPath } from 'node:path'
import { type Checker, join, resolvePath } from './check.js'

export interface FileProviderConf {
  /** absolute; '' = none */
  readonly directory: string
  /** absolute; '' = none */
  readonly filename: string
  /** reload when a file there changes (Traefik's default: true) */
  readonly watch: boolean
}

export const DYNAMIC_SECTIONS = ['routers', 'services', 'middlewares'] as const

export function checkProviders (c: Checker, raw: unknown, baseDir: string): FileProviderConf | null {
  const t = c.table(raw, 'providers', ['file'])
  if (t.file === undefined) return null
  const p = join('providers', 'file')
  const f = c.table(t.file, p, ['directory', 'filename', 'watch'])
  const directory = c.string(f, 'directory', p, '')
  const filename = c.string(f, 'filename', p, '')
  if ((directory === '') === (filename === '')) c.problems.push(`${p}: one of directory or filename (as Traefik's file provider)`)
  return {
    directory: directory === '' ? '' : resolvePath(baseDir, directory),
    filename: filename === '' ? '' : resolvePath(baseDir, filename),
    watch: c.bool(f, 'watch', p, true),
  }
}

/** The provider's files as they are now: directory's *.toml (not hidden, sorted), or the one file. */
export function providerFiles (raw: unknown, baseDir: string): string[] {
  const f = (raw as { providers?: { file?: { directory?: unknown, filename?: unknown } } } | null)?.providers?.file
  if (typeof f !== 'object' || f === null) return []
  if (typeof f.filename === 'string' && f.filename !== '') return [resolvePath(baseDir, f.filename)]
  if (typeof f.directory !== 'string' || f.directory === '') return []
  const dir = resolvePath(baseDir, f.directory)
  // a missing directory is read as empty: files may come later, and the watcher waits for them
  let names: string[] = []
  try { names = readdirSync(dir) } catch (e) { if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e }
  return names.filter((n) => n.endsWith('.toml') && !n.startsWith('.')).sort().map((n) => joinPath(dir, n))
}

/**
 * Merges each provider file's dynamic sections (`parsed`: file → its parsed TOML) into `raw`.
 * Returns the merged table and, per merged object ("routers.NAME"), the file it came from;
 * what a file may not hold, or a name defined twice, goes to `problems` with its file.
 */
export function mergeProviderFiles (raw: unknown, mainFile: string, parsed: ReadonlyArray<[string, unknown]>, problems: string[]): { raw: unknown, origins: Map<string, string> } {
  const origins = new Map<string, string>()
  if (parsed.length === 0) return { raw, origins }
  const out: Record<string, unknown> = { ...(raw as Record<string, unknown>) }
  for (const s of DYNAMIC_SECTIONS) {
    const own = out[s]
    out[s] = typeof own === 'object' && own !== null && !Array.isArray(own) ? { ...own } : {}
    for (const name of Object.keys(out[s] as object)) origins.set(`${s}.${name}`, mainFile)
  }
  for (const [file, t] of parsed) {
    if (typeof t !== 'object' || t === null) continue
    for (const [key, v] of Object.entries(t)) {
      if (!(DYNAMIC_SECTIONS as readonly string[]).includes(key)) {
        problems.push(`${file}: ${key}: not allowed in a provider file (only ${DYNAMIC_SECTIONS.join(', ')}; the rest belongs in ${mainFile})`)
        continue
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) {
        problems.push(`${file}: ${key}: expected a table`)
        continue
      }
      const into = out[key] as Record<string, unknown>
      for (const [name, obj] of Object.entries(v)) {
        const at = `${key}.${name}`
        const first = origins.get(at)
        if (first !== undefined) {
          problems.push(`${file}: ${at}: already defined in ${first}`)
          continue
        }
        into[name] = obj
        origins.set(at, file)
      }
    }
  }
  return { raw: out, origins }
}
