// The folders lb writes at run time, checked before anything starts: by
// `lb check` (the unit's ExecStartPre) and by `lb run`, so a read-only or
// foreign folder is one clear line naming the path, the key and the fix, not
// an EACCES stack trace from deep inside start-up.
import { accessSync, constants, statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Config } from './load.js'

interface Need { readonly key: string, readonly path: string, readonly kind: 'folder' | 'file' }

function needs (c: Config): Need[] {
  const out: Need[] = [{ key: 'global.state_dir', path: c.global.stateDir, kind: 'folder' }]
  if (c.global.accessLog !== 'stdout' && c.global.accessLog !== 'off') out.push({ key: 'global.access_log', path: c.global.accessLog, kind: 'file' })
  if (c.runtimeSocket.enabled) out.push({ key: 'runtime_socket.path', path: c.runtimeSocket.path, kind: 'file' })
  if (c.admin.enabled) out.push({ key: 'admin.state_file', path: c.admin.stateFile, kind: 'file' })
  const gen = c.generation
  if (gen.enabled && (gen.listen !== '' || c.services.some((s) => s.kind === 'generate'))) out.push({ key: 'generation.socket', path: gen.socket, kind: 'file' })
  return out
}

/** Why `dir` (made with mkdir -p if missing) cannot hold new files, or '' when it can. */
function folderProblem (dir: string): string {
  let d = dir
  // the nearest folder that exists must be writable (it gets the missing ones)
  for (;;) {
    try {
      if (!statSync(d).isDirectory()) return `${d} is not a folder`
      break
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code !== 'ENOENT') return `${d} cannot be reached by uid ${process.getuid?.() ?? '?'} (${code ?? 'error'} on the way to it)`
      if (dirname(d) === d) return `${d} does not exist`
      d = dirname(d)
    }
  }
  try {
    accessSync(d, constants.W_OK | constants.X_OK)
    return ''
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error'
    const why = code === 'EROFS' ? 'is on a read-only file system' : code === 'EACCES' ? `is not writable by uid ${process.getuid?.() ?? '?'}` : `cannot be written (${code})`
    return d === dir ? `${d} ${why}` : `${dir} is missing and ${d} ${why}`
  }
}

/**
 * One line per path lb could not write ('' in the list never appears): "global.state_dir:
 * /etc/run is missing and /etc is on a read-only file system; ..." with the fix.
 */
export function unwritablePaths (c: Config): string[] {
  const out: string[] = []
  for (const n of needs(c)) {
    const p = folderProblem(n.kind === 'folder' ? n.path : dirname(n.path))
    if (p !== '') {
      out.push(`${n.key} (${n.path}): ${p}; make it writable by the user lb runs as, or set ${n.key} to a path that is ` +
        // eslint-disable-next-line no-template-curly-in-string -- systemd's syntax, written out for the operator
        '(under systemd: "${STATE_DIRECTORY}" or "${RUNTIME_DIRECTORY}", see conf/lb.service)')
    }
  }
  return out
}
