// JSON-ish values for the API surfaces: a valid template with some of its
// fields replaced by values of the wrong type, edge numbers, odd strings,
// deep nesting, or the text broken outright.
import type { Rng } from './prng.js'

const STRINGS = ['', ' ', 'a', 'x'.repeat(300), '../etc', '%E9', '\u0000', '\ud800', 'é', '<script>', 'null', '-1', '1e999', 'web', 'web/s1', '127.0.0.1', '[::1]', 'unix:/tmp/x']

export function jsonValue (rng: Rng, depth = 0): unknown {
  switch (rng.int(depth > 3 ? 5 : 7)) {
    case 0: return null
    case 1: return rng.chance(0.5)
    case 2: return rng.chance(0.2) ? rng.edgeInt() + 0.5 : rng.edgeInt()
    case 3: return rng.pick(STRINGS)
    case 4: return rng.word(20)
    case 5: return Array.from({ length: rng.int(4) }, () => jsonValue(rng, depth + 1))
    default: {
      const o: Record<string, unknown> = {}
      for (let i = rng.int(4); i > 0; i--) o[rng.pick(['name', 'address', 'port', rng.word(6), '__proto__', 'constructor'])] = jsonValue(rng, depth + 1)
      return o
    }
  }
}

/** `template` with some fields replaced, dropped or added; sometimes not an object at all. */
export function mutate (rng: Rng, template: Record<string, unknown>): unknown {
  if (rng.chance(0.08)) return jsonValue(rng)
  const o: Record<string, unknown> = { ...template }
  const keys = Object.keys(o)
  for (let i = rng.range(0, 3); i > 0; i--) {
    const k = rng.pick(keys)
    const op = rng.int(4)
    if (op === 0) delete o[k]
    else if (op === 1) o[rng.word(8)] = jsonValue(rng)
    else o[k] = jsonValue(rng)
  }
  return o
}

/** The body text: JSON, or now and then broken JSON or deep nesting. */
export function bodyText (rng: Rng, value: unknown): string {
  const s = JSON.stringify(value) ?? 'null'
  switch (rng.int(14)) {
    case 0: return s.slice(0, rng.int(s.length))
    case 1: return '['.repeat(rng.pick([100, 5000, 100_000]))
    case 2: return s + rng.word(3)
    case 3: return rng.bytes(rng.range(1, 40)).toString('latin1')
    default: return s
  }
}
