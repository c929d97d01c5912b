// Authentication of the admin and dashboard listeners: HTTP basic auth against
// "user:hash" entries or bearer tokens, both from [admin]. Hashes are parsed and
// checked by core/auth/htpasswd.ts, as for the basicAuth plugin. bcrypt costs
// tens of milliseconds per check, so a verified Basic Authorization value is
// remembered (keyed by its SHA-256, never stored in clear) for a short while;
// a token costs one SHA-256 and is not remembered. An unknown user name is
// checked against a decoy of the first user's hash, so answer times do not
// tell which names exist.
import { createHash, timingSafeEqual } from 'node:crypto'
import { type HtpasswdEntry, decoyOf, parseEntry, verifyAsync, verifySync } from '../auth/htpasswd.js'
import type { Credentials } from '../config/admin.js'

const CACHE_MS = 60_000
const CACHE_MAX = 1024

export class Authenticator {
  readonly #users: readonly HtpasswdEntry[]
  /** what an unknown user name is checked against; null without users */
  readonly #decoy: HtpasswdEntry | null
  readonly #tokens: readonly Buffer[]
  readonly #required: boolean
  readonly #ok = new Map<string, number>()

  constructor (creds: Credentials) {
    // checkAdmin already refused every entry parseEntry refuses; one that slips
    // through anyway is left out, so nobody can log in as that user
    this.#users = creds.users.map((u) => parseEntry(u)).filter((e): e is HtpasswdEntry => typeof e !== 'string')
    this.#decoy = this.#users.length > 0 ? decoyOf(this.#users[0]!) : null
    this.#tokens = creds.tokens.map((t) => sha256(t))
    // counted before that filter: configured users still mean the listener needs auth
    this.#required = creds.users.length > 0 || creds.tokens.length > 0
  }

  get required (): boolean {
    return this.#required
  }

  /** The user name ("" for a token) when `authorization` is valid, else null. */
  async check (authorization: string | undefined): Promise<string | null> {
    if (authorization === undefined) return null
    const m = /^(Basic|Bearer)\s+(\S+)\s*$/i.exec(authorization)
    if (m === null) return null
    if (m[1]!.toLowerCase() === 'bearer') {
      const got = sha256(m[2]!)
      return this.#tokens.some((t) => timingSafeEqual(t, got)) ? '' : null
    }
    const text = Buffer.from(m[2]!, 'base64').toString('utf8')
    const i = text.indexOf(':')
    if (i < 0 || this.#decoy === null) return null
    const name = text.slice(0, i)
    const u = this.#users.find((x) => x.user === name)
    const key = sha256(authorization).toString('hex')
    const now = Date.now()
    const until = this.#ok.get(key)
    if (u !== undefined && until !== undefined && until > now) return name
    const ok = await verify(u ?? this.#decoy, text.slice(i + 1))
    if (!ok || u === undefined) return null
    if (this.#ok.size >= CACHE_MAX) this.#ok.clear()
    this.#ok.set(key, now + CACHE_MS)
    return name
  }
}

function sha256 (s: string): Buffer {
  return createHash('sha256').update(s).digest()
}

/** The password check; a hash bcryptjs cannot use (it throws) refuses the request rather than failing it. */
async function verify (u: HtpasswdEntry, password: string): Promise<boolean> {
  try {
    return verifySync(u, password) ?? await verifyAsync(u, password)
  } catch {
    return false
  }
}
