// JsonCloser: every prefix of a document that matches a schema, completed
// with closing(), parses and matches the schema. Documents are random values
// of each schema, written compact and indented, cut at every character.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { JsonCloser } from '../../core/gen/structured/json-close.js'
import { checkSchema } from '../../core/gen/structured/schema.js'
import { schemaMismatch } from './helpers.js'
import { SCHEMAS } from './schemas.js'

/** A small deterministic generator (LCG). */
function rng (seed: number): () => number {
  let s = seed >>> 0
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32
}

const WORDS = ['', 'a', 'cat', 'He said "hi"', 'tab\there', 'back\\slash', 'ünï', '🙂 ok', 'x'.repeat(8)]

/** A random value matching `s` (the subset in SCHEMAS). */
function sample (s: any, r: () => number, root: any): unknown {
  if (s.$ref !== undefined) return sample(root.$defs[s.$ref.split('/').pop()], r, root)
  if (s.oneOf !== undefined) return sample(s.oneOf[Math.floor(r() * s.oneOf.length)], r, root)
  if ('const' in s) return s.const
  if (s.enum !== undefined) return s.enum[Math.floor(r() * s.enum.length)]
  const type = Array.isArray(s.type) ? s.type[Math.floor(r() * s.type.length)] : s.type
  switch (type) {
    case 'null': return null
    case 'boolean': return r() < 0.5
    case 'integer': return Math.floor(r() * 2000) - 1000
    case 'number': return [0, -1.5, 3.25e-7, 12345.678, 1e21][Math.floor(r() * 5)]
    case 'string': {
      let w = WORDS[Math.floor(r() * WORDS.length)]!
      if (s.maxLength !== undefined) w = [...w].slice(0, s.maxLength).join('')
      while ([...w].length < (s.minLength ?? 0)) w += 'z'
      return w
    }
    case 'array': {
      const pre: any[] = s.prefixItems ?? []
      const n = pre.length > 0 ? pre.length : Math.max(s.minItems ?? 0, Math.min(s.maxItems ?? 4, Math.floor(r() * 4)))
      return Array.from({ length: n }, (_, i) => sample(i < pre.length ? pre[i] : s.items, r, root))
    }
    case 'object': {
      const o: Record<string, unknown> = {}
      for (const [k, sub] of Object.entries(s.properties ?? {})) if ((s.required ?? []).includes(k) || r() < 0.5) o[k] = sample(sub, r, root)
      if (s.additionalProperties !== undefined && s.additionalProperties !== false) {
        const n = Math.max(s.minProperties ?? 0, Math.floor(r() * 3))
        for (let i = 0; i < n; i++) o[`extra "${i}"`] = sample(s.additionalProperties, r, root)
      }
      return o
    }
  }
  return null
}

test('every prefix of a schema-valid document closes into a schema-valid document', () => {
  let cases = 0
  for (const [name, raw] of Object.entries(SCHEMAS)) {
    const checked = checkSchema(raw as never)
    assert.ok('schema' in checked)
    const schema = checked.schema
    const r = rng(name.length)
    for (let n = 0; n < 12; n++) {
      const text = JSON.stringify(sample(raw, r, raw), null, n % 3 === 0 ? undefined : 1 + (n % 3))
      for (let cut = 0; cut <= text.length; cut++) {
        const closer = new JsonCloser(schema)
        closer.push(text.slice(0, cut))
        const doc: string = text.slice(0, cut) + closer.closing()
        let v: unknown
        try { v = JSON.parse(doc) } catch (e) { assert.fail(`${name}: ${JSON.stringify(doc)} does not parse: ${(e as Error).message}`) }
        assert.equal(schemaMismatch(raw, v), null, `${name}: ${doc}`)
        assert.equal(closer.complete, cut === text.length && !/\d$/.test(text), `${name} at ${cut}`)
        cases++
      }
    }
  }
  assert.ok(cases > 1000)
})

test('format "json": any prefix of an object closes into an object', () => {
  const text = '{"a": [1, -2.5e3, true, null, {"b": "x\\u00e9\\n"}], "c": {}, "d": "tru"}'
  for (let cut = 0; cut <= text.length; cut++) {
    const closer = new JsonCloser('json')
    closer.push(text.slice(0, cut))
    const v = JSON.parse(text.slice(0, cut) + closer.closing())
    assert.equal(typeof v, 'object')
  }
  const c = new JsonCloser('json')
  c.push('  {"k": 12e')
  assert.equal(c.closing(), '0}')
})

test('a key named after an Object.prototype member is an ordinary key of the schema', () => {
  const schema = { type: 'object', properties: { a: { type: 'integer' } }, additionalProperties: { type: 'string' } }
  for (const key of ['constructor', '__proto__', 'toString']) {
    const c = new JsonCloser(schema)
    c.push(`{"${key}": "x`)
    assert.deepEqual(Object.keys(JSON.parse(`{"${key}": "x` + c.closing())), [key])
  }
})
