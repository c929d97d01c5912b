// Atomic, durable file replacement, for the files lb writes itself (the config
// API's state file, the ACME storage and certificate files): write a temp file
// in the same folder, fsync it, rename it over the old one, fsync the folder.
// A kill -9 at any moment leaves either the old or the new file, never a torn
// one. The temp file is `<path>.tmp-<pid>`.
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs'
import { dirname } from 'node:path'

/** Replaces `path` with `text` (created with `mode`, default owner-only). */
export function writeFileAtomic (path: string, text: string, mode = 0o600): void {
  mkdirSync(dirname(path), { recursive: true })
  const tmp = `${path}.tmp-${process.pid}`
  const fd = openSync(tmp, 'w', mode)
  try {
    writeSync(fd, text)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  try {
    renameSync(tmp, path)
  } catch (err) {
    try { unlinkSync(tmp) } catch { /* already gone */ }
    throw err
  }
  const dir = openSync(dirname(path), 'r')
  try {
    fsyncSync(dir)
  } finally {
    closeSync(dir)
  }
}
