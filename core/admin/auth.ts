// Authentication of the admin and dashboard listeners: HTTP basic auth against
// "user:hash" entries or bearer tokens, both from [admin]. bcrypt costs tens of
// milliseconds per check, so a verified Authorization value is remembered
// (keyed by its SHA-256, never stored in clear) for a short while.
import { createHash, timingSafeEqual } from 'node:crypto'
import bcrypt from 'bcryptjs'
import type { Credentials } from '../config/admin.js'

const CACHE_MS = 60_000
const CACHE_MAX = 1024

interface User { readonly name: string, readonly hash: string }

export class Authenticator {
  readonly #users: readonly User[]
  readonly #tokens: readonly Buffer[]
  readonly #ok = new Map<string, number>()

  constructor (creds: Credentials) {
    this.#users = creds.users.map((u) => {
      const i = u.indexOf(':')
      return { name: u.slice(0, i), hash: u.slice(i + 1) }
    })
    this.#tokens = creds.tokens.map((t) => sha256(t))
  }

  get required (): boolean {
    return this.#users.length > 0 || this.#tokens.length > 0
  }

  /** The user name ("" for a token) when `authorization` is valid, else null. */
  check (authorization: string | undefined): string | null {
    if (authorization === undefined) return null
    const key = sha256(authorization).toString('hex')
    const until = this.#ok.get(key)
    const now = Date.now()
    const m = /^(Basic|Bearer)\s+(\S+)\s*$/i.exec(authorization)
    if (m === null) return null
    let user: string | null = null
    if (m[1]!.toLowerCase() === 'bearer') {
      const got = sha256(m[2]!)
      user = this.#tokens.some((t) => timingSafeEqual(t, got)) ? '' : null
    } else {
      const text = Buffer.from(m[2]!, 'base64').toString('utf8')
      const i = text.indexOf(':')
      if (i < 0) return null
      const name = text.slice(0, i)
      const u = this.#users.find((x) => x.name === name)
      if (u === undefined) return null
      if (until !== undefined && until > now) return name
      user = verifyPassword(text.slice(i + 1), u.hash) ? name : null
    }
    if (user !== null) {
      if (this.#ok.size >= CACHE_MAX) this.#ok.clear()
      this.#ok.set(key, now + CACHE_MS)
    }
    return user
  }
}

function sha256 (s: string): Buffer {
  return createHash('sha256').update(s).digest()
}

/** bcrypt ($2a$/$2b$/$2y$) or {SHA} (base64 SHA-1, htpasswd -s). */
export function verifyPassword (password: string, hash: string): boolean {
  if (/^\$2[aby]\$/.test(hash)) return bcrypt.compareSync(password, hash.replace(/^\$2y\$/, '$2b$'))
  if (hash.startsWith('{SHA}')) {
    const want = Buffer.from(hash.slice(5), 'base64')
    const got = createHash('sha1').update(password).digest()
    return want.length === got.length && timingSafeEqual(want, got)
  }
  return false
}
