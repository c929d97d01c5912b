// A session as the oidc request path holds it (plugins/oidc.ts), and what goes
// upstream with it. Per request with a cached session: one Atomics.load to see
// whether any session was revoked since this one was last looked up (then one
// look in the shared table, core/shm/revocations.ts), one string comparison to
// see whether the browser sent the same Cookie header as before (then the
// upstream headers made for it serve again). Nothing is allocated.
//
// lb's cookies (the session and the login in progress) are removed from the
// Cookie header forwarded upstream: the session cookie is a bearer credential,
// and a backend, or its access log, holding it could replay the session.
// forward_session_cookie keeps them.
import { type Ctx, type Revocations, addUpstreamHeaders, dropRequestHeaders, now, revocationKey } from 'lb/plugin'
import type { OidcConf } from './oidc-config.js'
import { type Session, withoutCookies } from './oidc-cookie.js'

const COOKIE = ['cookie'] as const

/** The revocation subject of lb's session id `id` (its key is a digest of this). */
export function sessionSubject (id: string): string {
  return `lb-session\u0000${id}`
}

/** A session as the request path uses it: the cookie's content, when to refresh, its revocation key, what went upstream last. */
export class Live {
  readonly s: Session
  /** clock tick (now(), wrapping int32 ms) from which the tokens are refreshed; meaningful when s.r !== '' */
  readonly refreshAt: number
  /** the session id's key in the revocation table, and its birth in unix s */
  readonly ka: number
  readonly kb: number
  readonly bornS: number
  /** the revocation table's GEN at the last look (NaN: look again) */
  gen = NaN
  /** revoked: refused from now on (a revocation is never undone) */
  revoked = false
  /** the Cookie header `upstream` and `drop` were made for (null: none yet) */
  cookieIn: string | null = null
  upstream: readonly string[] = []
  drop: readonly string[] = []

  constructor (s: Session, refreshAt: number) {
    this.s = s
    this.refreshAt = refreshAt
    const [ka, kb] = revocationKey(sessionSubject(s.i))
    this.ka = ka
    this.kb = kb
    this.bornS = Math.floor(s.b / 1000)
  }
}

export class SessionPath {
  readonly #conf: OidcConf
  readonly #table: Revocations
  readonly #loginCookie: string
  /** headers dropped for the claims, and for the claims and the Cookie header */
  readonly #drop: readonly string[]
  readonly #dropCookie: readonly string[]

  constructor (conf: OidcConf, table: Revocations) {
    this.#conf = conf
    this.#table = table
    this.#loginCookie = `${conf.cookieName}_login`
    this.#drop = Object.freeze(conf.forward.map(([, h]) => h))
    this.#dropCookie = Object.freeze([...this.#drop, ...COOKIE])
  }

  /** false when the session has been revoked (on any worker, or any node that shared it). */
  valid (l: Live): boolean {
    if (l.revoked) return false
    if (this.#table.gen() === l.gen) return true
    if (this.#table.check(l.ka, l.kb, l.bornS, Math.floor(now() / 1000))) {
      l.revoked = true
      return false
    }
    l.gen = this.#table.seen
    return true
  }

  /** Lets the request of a valid session go upstream: its user, its claims as headers, lb's cookies taken out. */
  accept (ctx: Ctx, l: Live): void {
    ctx.user = l.s.u
    const cookie = this.#conf.forwardSessionCookie ? null : singleCookie(ctx)
    if (cookie === null) {
      // lb's cookies may stay (forward_session_cookie), or there are several Cookie lines: the general way
      this.forward(ctx, l.s.h)
      return
    }
    if (l.cookieIn !== cookie) {
      const rest = withoutCookies(cookie, this.#conf.cookieName, this.#loginCookie)
      l.cookieIn = cookie
      l.drop = rest === cookie ? this.#drop : this.#dropCookie
      l.upstream = rest === cookie || rest === '' ? l.s.h : Object.freeze([...l.s.h, 'cookie', rest])
    }
    if (l.drop.length > 0) dropRequestHeaders(ctx, l.drop)
    if (l.upstream.length > 0) addUpstreamHeaders(ctx, l.upstream)
  }

  /**
   * A request going upstream without a cached session (a skip path, a bearer token): `claims` as
   * headers, client-sent copies of them dropped, lb's cookies taken out of every Cookie line.
   */
  forward (ctx: Ctx, claims: readonly string[]): void {
    if (this.#drop.length > 0) dropRequestHeaders(ctx, this.#drop)
    if (claims.length > 0) addUpstreamHeaders(ctx, claims)
    if (this.#conf.forwardSessionCookie) return
    const h = ctx.headers
    let rewritten: string[] | null = null
    for (let i = 0; i < h.length; i += 2) {
      if (h[i] !== 'cookie') continue
      const rest = withoutCookies(h[i + 1]!, this.#conf.cookieName, this.#loginCookie)
      if (rest === h[i + 1] && rewritten === null) continue
      if (rewritten === null) {
        // the lines before this one were unchanged: they go as they were, in their order
        rewritten = []
        for (let j = 0; j < i; j += 2) if (h[j] === 'cookie') rewritten.push('cookie', h[j + 1]!)
      }
      if (rest !== '') rewritten.push('cookie', rest)
    }
    if (rewritten === null) return
    dropRequestHeaders(ctx, COOKIE)
    if (rewritten.length > 0) addUpstreamHeaders(ctx, rewritten)
  }
}

/** The one Cookie header of the request ('' when none), or null when it has several lines. */
function singleCookie (ctx: Ctx): string | null {
  const h = ctx.headers
  let found = -1
  for (let i = 0; i < h.length; i += 2) {
    if (h[i] !== 'cookie') continue
    if (found >= 0) return null
    found = i + 1
  }
  return found < 0 ? '' : h[found]!
}
