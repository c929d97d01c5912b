// [generation.auth] and [[generation.keys]]: checked here, called by
// core/gen/config.ts (the one place [generation] is checked). A problem names
// the key by its index and consumer, and never repeats what `hash` holds: a
// key pasted there by mistake is a secret.

import { type Checker, join, type Table } from '../../config/check.js'
import type { GenAuthConf, GenKeyConf, GenLimits, GenerationConf } from '../../config/generation.js'
import { BUDGET_SETS_ON, type BudgetRoom, NO_BUDGETS } from '../../shm/layout.js'
import { parseTokenHash } from '../../auth/token-digest.js'
import { MODEL_PATTERN } from './models.js'

/** Consumer names become metric labels and log fields: short, plain. */
const CONSUMER = /^[A-Za-z0-9._-]{1,64}$/
/** The metric label of every consumer without a key (core/gen/budget/stats.ts). */
export const OTHER = 'other'
const LIMIT_KEYS = ['rpm', 'tpm', 'tpd', 'max_in_flight'] as const
const KEY_KEYS = ['consumer', 'hash', ...LIMIT_KEYS, 'models'] as const
const AUTH_KEYS = ['required', ...LIMIT_KEYS] as const

function limits (c: Checker, t: Table, path: string): GenLimits {
  return {
    rpm: c.int(t, 'rpm', path, 0, 0, 1e9),
    tpm: c.int(t, 'tpm', path, 0, 0, 1e15),
    tpd: c.int(t, 'tpd', path, 0, 0, 1e15),
    maxInFlight: c.int(t, 'max_in_flight', path, 0, 0, 1e6),
  }
}

function hashes (c: Checker, t: Table, path: string, who: string): string[] {
  const raw = t.hash
  const list = typeof raw === 'string' ? [raw] : Array.isArray(raw) && raw.length > 0 && raw.every((x) => typeof x === 'string') ? raw as string[] : null
  const hp = join(path, 'hash')
  if (list === null) {
    c.problems.push(`${hp}: expected "sha256:<64 hex digits>" (lb hash-token KEY) or an array of them${who}, found ${raw === undefined ? 'nothing' : 'another type'}`)
    return []
  }
  list.forEach((h, i) => {
    if (parseTokenHash(h) === null) {
      const at = typeof raw === 'string' ? hp : join(hp, i)
      // never echoed: a key pasted here in clear would end up in the log
      c.problems.push(`${at}: expected "sha256:<64 hex digits>" (lb hash-token KEY)${who}, found a string of ${h.length} characters that is not one`)
    }
  })
  return list
}

export function checkKeys (c: Checker, raw: unknown, path: string): GenKeyConf[] {
  const seenConsumers = new Set<string>()
  const seenHashes = new Set<string>()
  return c.tables(raw, path).map((t, i) => {
    const p = join(path, i)
    c.table(t, p, KEY_KEYS)
    const consumer = c.string(t, 'consumer', p)
    const who = consumer === '' ? '' : ` (consumer ${JSON.stringify(consumer)})`
    if (consumer !== '' && (!CONSUMER.test(consumer) || consumer === OTHER)) {
      c.problem(join(p, 'consumer'), `a name of letters, digits, ".", "_" or "-" (at most 64), not "${OTHER}"`, consumer)
    }
    if (seenConsumers.has(consumer)) c.problems.push(`${join(p, 'consumer')}: consumer ${JSON.stringify(consumer)} is already used by another key; give one key several hashes instead`)
    seenConsumers.add(consumer)
    const hs = hashes(c, t, p, who)
    for (const h of hs) {
      if (seenHashes.has(h)) c.problems.push(`${join(p, 'hash')}: the same hash is configured for another key${who}`)
      seenHashes.add(h)
    }
    const models = c.strings(t, 'models', p, [])
    models.forEach((m, j) => { if (!MODEL_PATTERN.test(m)) c.problem(join(join(p, 'models'), j), `a model name or pattern like "qwen*"${who}`, m) })
    return { consumer, hashes: hs, models, ...limits(c, t, p) }
  })
}

export function checkAuth (c: Checker, raw: unknown, path: string): GenAuthConf {
  const t = c.table(raw, path, AUTH_KEYS)
  return { required: c.bool(t, 'required', path, true), ...limits(c, t, path) }
}

/** Whether `l` sets any limit (requests per minute, tokens per minute or day, in flight): else nothing is counted. */
export const hasLimits = (l: GenLimits): boolean => l.rpm > 0 || l.tpm > 0 || l.tpd > 0 || l.maxInFlight > 0

/**
 * The shared memory's room for budgets (core/shm/budget-records.ts): a record per key's consumer, and the table
 * of consumers without a key only when [generation.auth] gives them limits (else nothing of them is counted).
 */
export function budgetRoom (g: GenerationConf): BudgetRoom {
  if (!g.enabled) return NO_BUDGETS
  return { keyed: g.keys.length, sets: anonSets(g.auth) }
}

/** Sets of the table of consumers without a key: none unless [generation.auth] gives them limits. */
export const anonSets = (auth: GenAuthConf): number => hasLimits(auth) ? BUDGET_SETS_ON : 0
