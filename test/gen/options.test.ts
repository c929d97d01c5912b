// Request options arrive as client JSON: a key that is a member of every
// JavaScript object ("constructor", "__proto__") is an unknown option, ignored
// as Ollama ignores unknown options, not Object.prototype's member (it was a 500).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseOptions } from '../../core/gen/ollama/request.js'

test('options named after Object.prototype members are ignored like any unknown option', () => {
  for (const key of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']) {
    const raw = JSON.parse(`{"${key}": "x", "num_predict": 8}`)
    assert.deepEqual(parseOptions(raw), { numPredict: 8 }, key)
  }
})
