// A real full disk for the tests of what lb does when a write is refused: a
// small tmpfs mounted on a temp folder (root only), filled to the last byte.
import { spawnSync } from 'node:child_process'
import { closeSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { tempDir } from './helpers.js'

/**
 * A tmpfs of `kib` KiB on a new temp folder, unmounted after the test; null
 * (and the test skipped, saying why) where mount is not permitted.
 */
export function mountTmpfs (t: TestContext, kib = 64): string | null {
  const dir = tempDir('lb-tmpfs-')
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${kib}k,mode=0755`, 'tmpfs', dir], { encoding: 'utf8' })
  if (r.status !== 0) {
    t.skip(`a full disk is a small tmpfs, and mounting one was refused (${(r.stderr ?? r.error?.message ?? '').trim()}): run as root`)
    return null
  }
  // lazily, if something still has a file open there: the folder is removed when the test process exits
  t.after(() => { spawnSync('umount', ['-l', dir]) })
  return dir
}

/** Fills the file system of `dir` with the file `name` until not one byte more fits; returns its path. */
export function fill (dir: string, name = 'filler'): string {
  const path = join(dir, name)
  const fd = openSync(path, 'a')
  try {
    const block = Buffer.alloc(4096)
    for (const piece of [block, block.subarray(0, 1)]) {
      for (;;) {
        try {
          if (writeSync(fd, piece) < piece.length) break
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err
          break
        }
      }
    }
  } finally {
    closeSync(fd)
  }
  return path
}
