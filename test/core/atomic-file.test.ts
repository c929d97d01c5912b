// The one writer of the files lb keeps (core/atomic-file.ts), on a real full
// disk (a tmpfs): a write that does not fit throws LB_ERR_NO_SPACE naming the
// file and ENOSPC, leaves no temp file behind and the old file whole, also
// when the disk has room for part of it (write() then writes a part and
// reports no error).
import assert from 'node:assert/strict'
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { prepareFileAtomic, writeFileAtomic } from '../../core/atomic-file.js'
import { isLbError } from '../../core/errors.js'
import { fill, mountTmpfs } from '../tmpfs.js'

/** The LbError writeFileAtomic threw, or a failure when it did not throw one. */
function refused (path: string, data: string): { code: string, status: number, message: string } {
  try {
    writeFileAtomic(path, data)
  } catch (err) {
    assert.ok(isLbError(err), String(err))
    return { code: err.code, status: err.status, message: err.message }
  }
  assert.fail(`the write of ${data.length} bytes to ${path} was not refused`)
}

test('a full disk: LB_ERR_NO_SPACE (507) naming the file and ENOSPC; no temp file; the old file whole', (t) => {
  const dir = mountTmpfs(t)
  if (dir === null) return
  const file = join(dir, 'state.json')
  writeFileAtomic(file, '{"version": 1}\n')
  fill(dir)
  assert.deepEqual(refused(file, '{"version": 2}\n'), {
    code: 'LB_ERR_NO_SPACE', status: 507, message: `cannot write ${file} (ENOSPC, no space left on the device): the file is unchanged`,
  })
  assert.deepEqual(readdirSync(dir).sort(), ['filler', 'state.json'])
  assert.equal(readFileSync(file, 'utf8'), '{"version": 1}\n')
  // prepared and dropped (what the config API does when a cluster commit fails): nothing left either
  rmSync(join(dir, 'filler'))
  prepareFileAtomic(file, 'never in place').abort()
  assert.deepEqual(readdirSync(dir), ['state.json'])
  writeFileAtomic(file, '{"version": 2}\n')
  assert.equal(readFileSync(file, 'utf8'), '{"version": 2}\n', 'with space again, the write goes through')
})

test('room for part of the file: the short write is continued into ENOSPC, never renamed into place half-written', (t) => {
  const dir = mountTmpfs(t, 64)
  if (dir === null) return
  const file = join(dir, 'storage.json')
  writeFileAtomic(file, 'old\n')
  writeFileSync(join(dir, 'filler'), Buffer.alloc(40 * 1024)) // about 20 KiB stay free
  const big = 'x'.repeat(100 * 1024)
  assert.equal(refused(file, big).code, 'LB_ERR_NO_SPACE')
  assert.equal(readFileSync(file, 'utf8'), 'old\n', 'the old file, not the first 20 KiB of the new one')
  assert.deepEqual(readdirSync(dir).sort(), ['filler', 'storage.json'])
})
