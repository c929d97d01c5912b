// Authentication of the admin and dashboard listeners: HTTP basic auth against
// "user:hash" entries or bearer tokens, both from [admin]. Hashes are parsed and
// checked by core/auth/htpasswd.ts, as for the basicAuth plugin. bcrypt costs
// tens of milliseconds per check, so a verified Basic Authorization value is
// remembered (keyed by its SHA-256, never stored in clear) for a short while;
// a token costs one SHA-256 and is not remembered. Every password check costs
// the same whatever the user name, known or not (core/auth/password-table.ts),
// so answer times do not tell which names exist.
import { type HtpasswdEntry, parseEntry } from '../auth/htpasswd.js'
import { PasswordTable } from '../auth/password-table.js'
import { findDigest, tokenDigest } from '../auth/token-digest.js'
import { VerdictCache } from '../auth/verdict-cache.js'
import type { Credentials } from '../config/admin.js'
import { isLbError } from '../errors.js'

const CACHE_MS = 60_000
const CACHE_MAX = 1024

export class Authenticator {
  /** null without users */
  readonly #users: PasswordTable | null
  readonly #tokens: readonly Buffer[]
  readonly #required: boolean
  /** verified Basic values, by their SHA-256: the user name */
  readonly #ok = new VerdictCache<string>(CACHE_MAX, CACHE_MS)

  constructor (creds: Credentials) {
    // checkAdmin already refused every entry parseEntry refuses; one that slips
    // through anyway is left out, so nobody can log in as that user
    const users = creds.users.map((u) => parseEntry(u)).filter((e): e is HtpasswdEntry => typeof e !== 'string')
    this.#users = users.length > 0 ? new PasswordTable(users) : null
    this.#tokens = creds.tokens.map(tokenDigest)
    // counted before that filter: configured users still mean the listener needs auth
    this.#required = creds.users.length > 0 || creds.tokens.length > 0
  }

  get required (): boolean {
    return this.#required
  }

  /**
   * The user name ("" for a token) when `authorization` is valid, else null.
   * Rejects with LB_ERR_AUTH_BUSY when too many bcrypt checks wait already.
   */
  async check (authorization: string | undefined): Promise<string | null> {
    if (authorization === undefined) return null
    const m = /^(Basic|Bearer)\s+(\S+)\s*$/i.exec(authorization)
    if (m === null) return null
    if (m[1]!.toLowerCase() === 'bearer') {
      return findDigest(this.#tokens, tokenDigest(m[2]!)) >= 0 ? '' : null
    }
    const text = Buffer.from(m[2]!, 'base64').toString('utf8')
    const i = text.indexOf(':')
    if (i < 0 || this.#users === null) return null
    const name = text.slice(0, i)
    const key = tokenDigest(authorization).toString('hex')
    // only a verified value is remembered, so a remembered one is a known user's
    const remembered = this.#ok.get(key, Date.now())
    if (remembered !== undefined) return remembered
    if (!await verify(this.#users, name, text.slice(i + 1))) return null
    this.#ok.set(key, name, Date.now())
    return name
  }
}

/**
 * The password check. A hash bcryptjs cannot use (it throws) refuses the
 * request rather than failing it; a full bcrypt queue is the caller's to answer.
 */
async function verify (users: PasswordTable, name: string, password: string): Promise<boolean> {
  try {
    return await users.check(name, password)
  } catch (err) {
    if (isLbError(err) && err.code === 'LB_ERR_AUTH_BUSY') throw err
    return false
  }
}
