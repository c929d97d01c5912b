// Every error code is documented in ERRORS.md, and ERRORS.md documents no code that does not exist.
import { strict as assert } from 'node:assert'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { ERRORS, formatError, lbError } from '../../core/errors.js'
import { ROOT } from '../helpers.js'

test('ERRORS.md and core/errors.ts list the same codes', () => {
  const doc = readFileSync(join(ROOT, 'ERRORS.md'), 'utf8')
  const documented = [...doc.matchAll(/^## (LB_ERR_[A-Z0-9_]+)\s*$/gm)].map((m) => m[1]!).sort()
  assert.deepEqual(documented, Object.keys(ERRORS).sort())
})

test('messages fill their placeholders; errors carry code and status', () => {
  assert.equal(formatError('LB_ERR_BODY_TOO_LARGE', { limit: 10 }), 'request body larger than 10 bytes')
  const e = lbError('LB_ERR_NO_SERVER', { service: 'web', why: 'it has no servers' })
  assert.equal(e.code, 'LB_ERR_NO_SERVER')
  assert.equal(e.status, 503)
  assert.equal(e.message, 'no server available for service web: it has no servers')
})
