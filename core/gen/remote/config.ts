// The remote parts of [generation]: [[generation.servers]], [generation.aliases]
// and [generation.fallbacks]. Called by core/gen/config.ts (the one place the
// table is checked); every problem names its key path, what was expected and
// what was found, as `lb check` prints it.

import { type Checker, join, type Table } from '../../config/check.js'
import { REMOTE_KINDS, type RemoteKind, type RemoteServerConf } from '../../config/generation.js'
import { parseModelName } from '../models/names.js'

const SERVER_KEYS = ['name', 'kind', 'url', 'api_key', 'refresh'] as const
const NAME = /^[A-Za-z0-9_.-]{1,64}$/
const ENV = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g

export interface RemoteConf {
  servers: RemoteServerConf[]
  aliases: Record<string, string>
  fallbacks: Record<string, string[]>
}

/** The base URL of a server, or null when it is not an http(s) URL with a host (and no query, fragment or credentials). */
function baseUrl (raw: string, kind: RemoteKind): string | null {
  let u: URL
  try { u = new URL(raw) } catch { return null }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.hostname === '' || u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '') return null
  let path = u.pathname.replace(/\/+$/, '')
  // an OpenAI client's base URL ends in /v1; the paths lb asks are /v1/... below the server's root
  if (kind === 'openai' && path.endsWith('/v1')) path = path.slice(0, -3)
  return `${u.protocol}//${u.host}${path}`
}

/** "${NAME}" parts take their value from the environment; an unset one is a problem (a key must not silently be ""). */
function expandKey (c: Checker, path: string, raw: string): string {
  let missing: string | null = null
  const out = raw.replace(ENV, (_m, name: string) => {
    const v = process.env[name]
    if (v === undefined || v === '') missing ??= name
    return v ?? ''
  })
  // the problem names the variable, never the value
  if (missing !== null) c.problems.push(`${path}: expected environment variable ${missing} to be set, found it unset or empty`)
  return out
}

function checkServers (c: Checker, raw: unknown, path: string): RemoteServerConf[] {
  const out: RemoteServerConf[] = []
  const seen = new Set<string>()
  const list = c.tables(raw, path)
  for (let i = 0; i < list.length; i++) {
    const at = join(path, i)
    const t = c.table(list[i], at, SERVER_KEYS)
    const name = c.string(t, 'name', at)
    if (t.name !== undefined && !NAME.test(name)) c.problem(join(at, 'name'), 'a name of letters, digits, "_", "-" or "." (at most 64)', t.name)
    else if (seen.has(name)) c.problem(join(at, 'name'), 'a name no other server has', t.name)
    seen.add(name)
    const kind = c.oneOf(t, 'kind', at, REMOTE_KINDS)
    const rawUrl = c.string(t, 'url', at)
    const url = rawUrl === '' ? null : baseUrl(rawUrl, kind)
    if (rawUrl !== '' && url === null) c.problem(join(at, 'url'), 'an http:// or https:// URL with a host, like "http://10.0.0.5:11434"', t.url)
    const raw = c.string(t, 'api_key', at, '')
    const key = raw === '' ? '' : expandKey(c, join(at, 'api_key'), raw)
    // it goes into a request head as it is: a line break would start a header of its own (the value is never shown)
    if (/[^\x21-\x7e]/.test(key)) c.problems.push(`${join(at, 'api_key')}: expected visible ASCII characters (it is sent as a bearer token), found a space, a control or a non-ASCII character`)
    out.push({
      name,
      kind,
      url: url ?? '',
      apiKey: key,
      refreshMs: c.duration(t, 'refresh', at, 10_000, 100),
    })
  }
  return out
}

/** A table of model name -> value, keys canonical; `value` checks one value (null: reported). */
function nameTable<T> (c: Checker, raw: unknown, path: string, value: (v: unknown, at: string) => T | null): Record<string, T> {
  const out: Record<string, T> = {}
  for (const [k, v] of Object.entries(c.table(raw, path, null))) {
    const at = join(path, k)
    const name = parseModelName(k)
    if (name === null) c.problem(at, 'a model name like "name" or "name:tag"', k)
    const x = value(v, at)
    if (name !== null && x !== null) out[name] = x
  }
  return out
}

export function checkRemote (c: Checker, t: Table, path: string): RemoteConf {
  const servers = checkServers(c, t.servers, join(path, 'servers'))
  const target = (v: unknown, at: string): string | null => {
    const n = typeof v === 'string' ? parseModelName(v) : null
    if (n === null) c.problem(at, 'a model name like "qwen2.5:7b"', v)
    return n
  }
  const aliases = nameTable(c, t.aliases, join(path, 'aliases'), target)
  for (const [from, to] of Object.entries(aliases)) {
    if (Object.hasOwn(aliases, to)) c.problem(join(join(path, 'aliases'), from), 'the name of a model, not of another alias', to)
  }
  const fallbacks = nameTable(c, t.fallbacks, join(path, 'fallbacks'), (v, at) => {
    if (!Array.isArray(v) || v.length === 0) {
      c.problem(at, 'a non-empty array of model names', v)
      return null
    }
    const names = v.map((x, i) => target(x, join(at, i)))
    return names.every((n) => n !== null) ? names as string[] : null
  })
  return { servers, aliases, fallbacks }
}
