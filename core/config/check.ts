// Typed readers for one TOML table, used by every config section validator.
// Each reader returns a usable value even when the input is wrong (the default,
// or a zero value) and records a problem naming the key path, what was expected
// and what was found, so one load reports every problem at once.

import { isAbsolute, resolve } from 'node:path'

export type Table = Record<string, unknown>

export function describe (v: unknown): string {
  if (v === undefined) return 'nothing'
  if (v === null) return 'null'
  if (Array.isArray(v)) return `an array of ${v.length}`
  if (v instanceof Date) return 'a date'
  if (typeof v === 'object') return 'a table'
  if (typeof v === 'string') return JSON.stringify(v)
  return `${typeof v} ${String(v)}`
}

export function join (path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`
  const k = /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key)
  return path === '' ? k : `${path}.${k}`
}

/**
 * A configured path relative to baseDir (the config file's folder, or the
 * state folder), after `${NAME}` and `${NAME:-default}` take their value from
 * the environment (an empty or unset NAME gives the default, or ''): one config
 * file serves a clone ("../run") and a systemd unit, which sets STATE_DIRECTORY
 * and RUNTIME_DIRECTORY (StateDirectory=, RuntimeDirectory=). It lives here
 * rather than in static.ts because tls.ts needs it and static.ts imports tls.ts.
 */
export function resolvePath (baseDir: string, p: string): string {
  const e = p.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_m, name: string, def: string | undefined) => {
    const v = process.env[name]
    return v !== undefined && v !== '' ? v : def ?? ''
  })
  return isAbsolute(e) ? e : resolve(baseDir, e)
}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/
const DURATION_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const SIZE = /^(\d+)([kKmMgG]?)$/
const SIZE_MUL: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }

/** Parses "250ms", "5s", "1.5m", "2h" into milliseconds; NaN when malformed. */
export function parseDuration (s: string): number {
  const m = DURATION.exec(s)
  return m === null ? NaN : Math.round(Number(m[1]) * DURATION_MS[m[2]!]!)
}

/** Parses "100M", "10k", "512" (bytes, binary multiples, as nginx) into bytes; NaN when malformed. */
export function parseSize (s: string): number {
  const m = SIZE.exec(s)
  return m === null ? NaN : Number(m[1]) * SIZE_MUL[m[2]!.toLowerCase()]!
}

export class Checker {
  readonly problems: string[] = []

  problem (path: string, expected: string, found: unknown): void {
    this.problems.push(`${path}: expected ${expected}, found ${describe(found)}`)
  }

  /** A sub-table; reports keys not in `allowed` (unless allowed is null). Missing → {}. */
  table (v: unknown, path: string, allowed: readonly string[] | null): Table {
    if (v === undefined) return {}
    if (typeof v !== 'object' || v === null || Array.isArray(v) || v instanceof Date) {
      this.problem(path, 'a table', v)
      return {}
    }
    if (allowed !== null) {
      for (const k of Object.keys(v)) {
        if (!allowed.includes(k)) this.problems.push(`${join(path, k)}: unknown key (allowed: ${allowed.join(', ')})`)
      }
    }
    return v as Table
  }

  /** An array of tables (TOML [[x]]). */
  tables (v: unknown, path: string): Table[] {
    if (v === undefined) return []
    if (!Array.isArray(v)) {
      this.problem(path, 'an array of tables', v)
      return []
    }
    return v.map((e, i) => this.table(e, join(path, i), null))
  }

  string (t: Table, key: string, path: string, def?: string): string {
    const v = t[key]
    if (v === undefined) {
      if (def === undefined) this.problem(join(path, key), 'a string (required)', v)
      return def ?? ''
    }
    if (typeof v !== 'string') {
      this.problem(join(path, key), 'a string', v)
      return def ?? ''
    }
    return v
  }

  oneOf<T extends string> (t: Table, key: string, path: string, values: readonly T[], def?: T): T {
    const v = this.string(t, key, path, def)
    if (values.includes(v as T)) return v as T
    if (t[key] !== undefined && typeof t[key] === 'string') {
      this.problem(join(path, key), `one of ${values.map((x) => JSON.stringify(x)).join(', ')}`, v)
    }
    return def ?? values[0]!
  }

  int (t: Table, key: string, path: string, def: number | undefined, min: number, max: number): number {
    const v = t[key]
    if (v === undefined) {
      if (def === undefined) this.problem(join(path, key), `an integer from ${min} to ${max} (required)`, v)
      return def ?? min
    }
    const n = typeof v === 'bigint' ? Number(v) : v
    if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
      this.problem(join(path, key), `an integer from ${min} to ${max}`, v)
      return def ?? min
    }
    return n
  }

  number (t: Table, key: string, path: string, def: number, min: number, max: number): number {
    const v = t[key]
    if (v === undefined) return def
    const n = typeof v === 'bigint' ? Number(v) : v
    if (typeof n !== 'number' || !Number.isFinite(n) || n < min || n > max) {
      this.problem(join(path, key), `a number from ${min} to ${max}`, v)
      return def
    }
    return n
  }

  bool (t: Table, key: string, path: string, def: boolean): boolean {
    const v = t[key]
    if (v === undefined) return def
    if (typeof v !== 'boolean') {
      this.problem(join(path, key), 'true or false', v)
      return def
    }
    return v
  }

  /** A duration string ("5s", "250ms", "1m"); returns milliseconds. */
  duration (t: Table, key: string, path: string, defMs: number, minMs = 0, maxMs = Infinity): number {
    const v = t[key]
    if (v === undefined) return defMs
    const ms = typeof v === 'string' ? parseDuration(v) : NaN
    if (!(ms >= minMs && ms <= maxMs)) {
      const range = maxMs < Infinity ? ` from ${minMs / 1000}s to ${maxMs / 1000}s` : minMs > 0 ? ` of at least ${minMs}ms` : ''
      this.problem(join(path, key), `a duration like "5s" or "250ms"${range}`, v)
      return defMs
    }
    return ms
  }

  /** A size ("100M", "10k") or a plain integer of bytes; returns bytes. */
  size (t: Table, key: string, path: string, def: number): number {
    const v = t[key]
    if (v === undefined) return def
    const n = typeof v === 'string' ? parseSize(v) : (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : NaN)
    if (Number.isNaN(n)) {
      this.problem(join(path, key), 'a size like "100M", "64k" or a number of bytes', v)
      return def
    }
    return n
  }

  strings (t: Table, key: string, path: string, def: readonly string[]): string[] {
    const v = t[key]
    if (v === undefined) return [...def]
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
      this.problem(join(path, key), 'an array of strings', v)
      return [...def]
    }
    return v as string[]
  }
}

/** An HTTP header name (RFC 9110 token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** A realm goes into a quoted-string challenge (`realm="..."`), written without escaping. */
export function checkRealm (c: Checker, path: string, realm: string): void {
  if (!/^[\x20-\x7e]*$/.test(realm) || /["\\]/.test(realm)) c.problem(path, 'printable ASCII without " or \\', realm)
}

/** Recursively freezes a plain config object (arrays and tables); typed arrays (a rule's DFA tables) cannot be frozen and stay as they are. */
export function deepFreeze<T> (o: T): T {
  if (typeof o === 'object' && o !== null && !Object.isFrozen(o) && !ArrayBuffer.isView(o)) {
    Object.freeze(o)
    for (const v of Object.values(o as object)) deepFreeze(v)
  }
  return o
}
