// The oidc middleware's cookies: sealed (AES-256-GCM: encrypted and
// authenticated) with the 32-byte cookie secret, so the session lives in the
// browser and any worker of any node holding the same secret can read it; no
// server-side store. A cookie's purpose (the session, or a login in progress)
// and name are the additional authenticated data, so one cannot stand in for
// the other, and a cookie sealed with another key, or changed by one bit, opens
// to nothing.
//
// Wire form: "v1." + base64url(iv[12] | ciphertext | tag[16]); the plaintext is JSON.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import type { OidcConf } from './oidc-config.js'

const IV_BYTES = 12
const TAG_BYTES = 16
const PREFIX = 'v1.'

/** A signed-in user, as the session cookie carries it. Times are ms since the epoch. */
export interface Session {
  /** the session's id (random, 128 bits): a logout revokes it (core/shm/revocations.ts); refreshed cookies keep it */
  readonly i: string
  /** when the session was born (the login) */
  readonly b: number
  /** the user name for the access log (email, else sub) */
  readonly u: string
  /** flat [header, value, ...] of forwarded claims, header names lower-case */
  readonly h: readonly string[]
  /** end of the session (session_lifetime after login): refused from then on */
  readonly e: number
  /** expiry of the provider's tokens: refreshed from `refresh_before` ahead of it when r is set */
  readonly t: number
  /** the refresh token, '' when the provider gave none */
  readonly r: string
}

/** A login in progress, between the redirect to the provider and its callback. */
export interface Login {
  /** state, nonce and PKCE code verifier sent with the authorization request */
  readonly s: string
  readonly n: string
  readonly v: string
  /** where to go back to after the login: a path on this host */
  readonly r: string
  /** the login is refused after this (ms since the epoch) */
  readonly e: number
}

/** What a middleware's cookies are bound to besides the key and the cookie name: the provider, the client and the rules it checked. */
export type Binding = Pick<OidcConf, 'issuer' | 'clientId' | 'emailDomains' | 'claimMatch' | 'forward'>

export class CookieSealer {
  readonly #key: Buffer
  readonly #aadSession: Buffer
  readonly #aadLogin: Buffer

  /**
   * key: exactly 32 bytes; name: the session cookie's name. Both and `binding` are bound into every cookie: a
   * session the rules of one middleware admitted (its allowed domains, claim matches, forwarded headers) never
   * opens in another that shares the key file and the cookie name, since the rules are checked only at login.
   */
  constructor (key: Buffer, name: string, binding: Binding) {
    if (key.length !== 32) throw new Error(`the cookie secret must be 32 bytes, found ${key.length}`)
    this.#key = key
    const b = JSON.stringify([binding.issuer, binding.clientId, binding.emailDomains, binding.claimMatch, binding.forward])
    this.#aadSession = Buffer.from(`lb-oidc session ${name} ${b}`)
    this.#aadLogin = Buffer.from(`lb-oidc login ${name} ${b}`)
  }

  sealSession (s: Session): string { return this.#seal(s, this.#aadSession) }
  sealLogin (l: Login): string { return this.#seal(l, this.#aadLogin) }

  /**
   * The session in a cookie value, or null when it is not one this key sealed (or is malformed, or
   * has no id: sealed by an lb before revocations, which such a session could outlive). Expiry and
   * revocation are the caller's.
   */
  openSession (v: string): Session | null {
    const o = this.#open(v, this.#aadSession) as Session | null
    return o !== null && typeof o.i === 'string' && o.i !== '' && typeof o.b === 'number' && typeof o.u === 'string' && Array.isArray(o.h) && typeof o.e === 'number' && typeof o.t === 'number' && typeof o.r === 'string' ? o : null
  }

  openLogin (v: string): Login | null {
    const o = this.#open(v, this.#aadLogin) as Login | null
    return o !== null && typeof o.s === 'string' && typeof o.n === 'string' && typeof o.v === 'string' && typeof o.r === 'string' && typeof o.e === 'number' ? o : null
  }

  #seal (value: unknown, aad: Buffer): string {
    const iv = randomBytes(IV_BYTES)
    const c = createCipheriv('aes-256-gcm', this.#key, iv)
    c.setAAD(aad)
    const body = Buffer.concat([iv, c.update(JSON.stringify(value), 'utf8'), c.final(), c.getAuthTag()])
    return PREFIX + body.toString('base64url')
  }

  #open (v: string, aad: Buffer): unknown {
    if (!v.startsWith(PREFIX)) return null
    const raw = Buffer.from(v.slice(PREFIX.length), 'base64url')
    if (raw.length < IV_BYTES + TAG_BYTES + 2) return null
    try {
      const d = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, IV_BYTES))
      d.setAAD(aad)
      d.setAuthTag(raw.subarray(raw.length - TAG_BYTES))
      const text = Buffer.concat([d.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), d.final()]).toString('utf8')
      const o: unknown = JSON.parse(text)
      return typeof o === 'object' && o !== null ? o : null
    } catch {
      return null // wrong key, changed bytes (the tag check fails) or not JSON
    }
  }
}

/** The value of cookie `name` in a Cookie header, '' when absent. Allocates only the value. */
export function cookieValue (header: string, name: string): string {
  let i = 0
  while (i < header.length) {
    while (header.charCodeAt(i) === 32) i++
    const end = header.indexOf(';', i)
    const stop = end < 0 ? header.length : end
    if (header.startsWith(name, i) && header.charCodeAt(i + name.length) === 61 /* = */) {
      return header.slice(i + name.length + 1, stop).trim()
    }
    i = stop + 1
  }
  return ''
}

/**
 * A Cookie header without the cookies named `a` or `b` (every one of them), the others byte for byte as
 * sent: their order, the separators between them, a trailing ";". Returns `header` itself when neither is
 * in it, '' when nothing else is. A name matches whole: "x_a", "a2" or "a_login" (unless it is `b`) stay.
 */
export function withoutCookies (header: string, a: string, b: string): string {
  if (!header.includes(a) && !header.includes(b)) return header
  let out = ''
  let kept = 0
  let removed = false
  for (let i = 0; i <= header.length;) {
    const end = header.indexOf(';', i)
    const stop = end < 0 ? header.length : end
    let j = i
    while (header.charCodeAt(j) === 32 || header.charCodeAt(j) === 9) j++
    const ours = isCookie(header, j, a) || isCookie(header, j, b)
    if (ours) removed = true
    else {
      // a segment keeps the white space before it, except the first one kept after a removed first
      out += kept === 0 ? (i === 0 ? header.slice(i, stop) : header.slice(j, stop)) : ';' + header.slice(i, stop)
      kept++
    }
    if (end < 0) break
    i = end + 1
  }
  return removed ? out : header
}

function isCookie (header: string, at: number, name: string): boolean {
  return header.startsWith(name, at) && header.charCodeAt(at + name.length) === 61 /* = */
}

export interface CookieAttrs {
  /** Domain attribute, '' = host-only */
  readonly domain: string
  readonly secure: boolean
}

/** A Set-Cookie value: HttpOnly, SameSite=Lax (the provider's redirect back is a top-level GET), Path=/. maxAgeS 0 deletes it. */
export function setCookie (name: string, value: string, maxAgeS: number, a: CookieAttrs): string {
  return `${name}=${value}; Path=/; Max-Age=${maxAgeS}; HttpOnly; SameSite=Lax${a.secure ? '; Secure' : ''}${a.domain !== '' ? `; Domain=${a.domain}` : ''}`
}
