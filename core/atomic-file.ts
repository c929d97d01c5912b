// Atomic, durable file replacement: the one way lb writes a file it keeps
// (the config API's state file, the ACME storage and certificate files, the
// built-in model): write a temp file in the same folder, fsync it, rename it
// over the old one, fsync the folder. A kill -9 at any moment leaves either
// the old or the new file, never a torn one. The temp file is
// `<path>.tmp-<pid>`.
//
// A write that fails (a full disk: ENOSPC, or a quota: EDQUOT, at any step)
// removes its temp file and leaves the old file as it was; it throws
// LB_ERR_NO_SPACE (HTTP 507) or LB_ERR_WRITE (500), naming the file and the
// cause, for the caller to answer in its own API's shape. Every byte is
// written (a short write() on a nearly full disk is continued, so it fails
// with ENOSPC rather than renaming half a file into place).
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs'
import { dirname } from 'node:path'
import { type LbError, lbError } from './errors.js'

/** A file written to its temp name and synced, not yet in place: commit() or abort() it. */
export interface PreparedFile {
  /** Renames it over the file and syncs the folder. Throws LB_ERR_NO_SPACE / LB_ERR_WRITE (the temp file is then removed). */
  commit (): void
  /** Removes the temp file; the file stays as it was. */
  abort (): void
}

/** The error a failed write of `path` is reported with: the cause's code and message, the file's own name (not the temp one). */
export function writeError (path: string, err: unknown): LbError {
  const e = err as NodeJS.ErrnoException
  if (e.code === 'ENOSPC' || e.code === 'EDQUOT') {
    return lbError('LB_ERR_NO_SPACE', { file: path, cause: e.code === 'ENOSPC' ? 'ENOSPC, no space left on the device' : 'EDQUOT, the disk quota is exhausted' })
  }
  return lbError('LB_ERR_WRITE', { file: path, reason: e.code !== undefined ? `${e.code}, ${e.syscall ?? 'write'} failed` : e.message })
}

function removeQuietly (path: string): void {
  try { unlinkSync(path) } catch { /* not made, or already gone */ }
}

/** Writes `data` to `path`'s temp file (created with `mode`, default owner-only) and syncs it. */
export function prepareFileAtomic (path: string, data: string | Buffer, mode = 0o600): PreparedFile {
  const tmp = `${path}.tmp-${process.pid}`
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data
  let fd = -1
  try {
    mkdirSync(dirname(path), { recursive: true })
    fd = openSync(tmp, 'w', mode)
    for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off)
    fsyncSync(fd)
    const f = fd
    fd = -1
    closeSync(f) // may report a write error too (NFS)
  } catch (err) {
    if (fd >= 0) try { closeSync(fd) } catch { /* reported below */ }
    removeQuietly(tmp)
    throw writeError(path, err)
  }
  let done = false
  return {
    commit: () => {
      if (done) return
      done = true
      try {
        renameSync(tmp, path)
      } catch (err) {
        removeQuietly(tmp)
        throw writeError(path, err)
      }
      // the rename is what makes the new file the file: a folder that cannot be synced does not undo it
      let dir = -1
      try {
        dir = openSync(dirname(path), 'r')
        fsyncSync(dir)
      } catch { /* durable at the file system's next sync */ } finally {
        if (dir >= 0) closeSync(dir)
      }
    },
    abort: () => {
      if (done) return
      done = true
      removeQuietly(tmp)
    },
  }
}

/** Replaces `path` with `data` (see the header comment). */
export function writeFileAtomic (path: string, data: string | Buffer, mode = 0o600): void {
  prepareFileAtomic(path, data, mode).commit()
}
