// oidc: OpenID Connect login in front of a route (the job of oauth2-proxy).
// A browser without a session is sent to the provider (authorization code flow
// with PKCE, state and nonce, through openid-client); the callback checks the
// state, exchanges the code, verifies the ID token (signature by the
// provider's keys, iss, aud, exp, nonce) and sets a sealed session cookie
// (oidc-cookie.ts: every worker of every node with the key reads it).
// Requests that want JSON (Accept: application/json, or an XHR) get 401
// instead of a redirect; while the provider does not answer, both get 503. A
// bearer JWT access token of the same provider is accepted too, for APIs.
// Chosen claims go upstream as headers; client-sent headers of those names
// never do, nor do lb's own cookies (oidc-session.ts).
//
// Logout revokes the session: its id goes into the node's shared revocation
// table, which every worker reads (core/shm/revocations.ts), and through the
// control plane to the state folder and every other node (env.shareRevocation);
// the answer waits until every live node has it. A copy of the cookie taken
// before the logout is refused from then on, wherever it is sent.
//
// Per request with a valid session cookie: one cache lookup keyed by the
// cookie (a cookie is opened once per cache lifetime) and the checks of
// oidc-session.ts; from `refresh_before` ahead of the tokens' expiry the
// refresh token gets new ones and a new cookie (the same session id).
// Everything that talks to the provider is async and off the cached path;
// metadata and keys come from oidc-issuer.ts, loaded in the background.
import { randomBytes } from 'node:crypto'
import {
  type Ctx, type Reply, type Verdict, HANDLED, NEXT, Revocations, VerdictCache, addResponseHeaders, definePlugin,
  formatError, now, revocationKey, unixNow,
} from 'lb/plugin'
import * as client from 'openid-client'
import { claimHeaders, refusal, userOf } from './oidc-claims.js'
import { type OidcConf, validateOidc } from './oidc-config.js'
import { type CookieAttrs, type Session, CookieSealer, cookieValue, setCookie } from './oidc-cookie.js'
import { Issuer, isNetwork, reason } from './oidc-issuer.js'
import { Live, SessionPath, sessionSubject } from './oidc-session.js'

const LOGIN_TTL_MS = 10 * 60_000
const CACHE_SIZE = 4096
/** a refresh the provider could not answer is tried again after this (ms) */
const REFRESH_RETRY_MS = 10_000
const TEXT = 'text/plain; charset=utf-8'

function reply (status: number, body: string, headers: string[] = []): Reply {
  return { status, headers: ['content-type', TEXT, 'cache-control', 'no-store', ...headers], body: body + '\n' }
}

/** The original request as a return path: same host only (a path, never "//host" or "/\\host", which browsers read as another host). */
function returnPath (ctx: Ctx): string {
  const p = ctx.path.startsWith('//') || ctx.path.startsWith('/\\') ? '/' : ctx.path
  return ctx.query === '' ? p : `${p}?${ctx.query}`
}

export default definePlugin<OidcConf>({
  name: 'oidc',
  api: 1,
  validate: validateOidc,
  create (conf, env) {
    const report = env.setStatus ?? (() => {})
    const issuer = new Issuer(conf, env.log, report)
    const sealer = new CookieSealer(Buffer.from(conf.cookieSecret, 'base64'), conf.cookieName, conf)
    const loginCookie = `${conf.cookieName}_login`
    const cache = new VerdictCache<Live>(CACHE_SIZE, conf.sessionLifetimeMs)
    const bearerCache = new VerdictCache<Session>(CACHE_SIZE, 60_000)
    /** refreshes in flight by refresh token: concurrent requests of one session share one */
    const refreshing = new Map<string, Promise<Session | null>>()
    const revocations = new Revocations(env.shm.i32)
    const sessions = new SessionPath(conf, revocations)
    const lifetimeS = Math.floor(conf.sessionLifetimeMs / 1000)
    const unauthorized = Object.freeze(reply(401, formatError('LB_ERR_UNAUTHORIZED'), ['www-authenticate', 'Bearer realm="oidc"'])) as Reply
    const badToken = Object.freeze(reply(401, formatError('LB_ERR_UNAUTHORIZED'), ['www-authenticate', 'Bearer realm="oidc", error="invalid_token"'])) as Reply
    const attrs = (ctx: Ctx): CookieAttrs => ({ domain: conf.cookieDomain, secure: ctx.proto === 'https' })
    /** scheme://host[:port] as the client addressed us (the redirect URI must be registered at the provider as such) */
    const origin = (ctx: Ctx): string => `${ctx.proto}://${ctx.header('host') || ctx.host}`
    /** the answer while the provider's metadata is not loaded */
    const unavailable = (): Reply => reply(503, formatError('LB_ERR_OIDC_UNAVAILABLE', { issuer: conf.issuer, reason: issuer.error === '' ? 'metadata not loaded yet' : issuer.error }), ['retry-after', '5'])

    const accept = (ctx: Ctx, l: Live): Verdict => {
      sessions.accept(ctx, l)
      return NEXT
    }
    const answer = (ctx: Ctx, r: Reply): Verdict => {
      ctx.reply = r
      return HANDLED
    }
    // sessions last at most 20 days (validated), well inside the tick's 24.8-day wrap
    const live = (s: Session): Live => new Live(s, (now() + Math.max(0, s.t - conf.refreshBeforeMs - Date.now())) | 0)
    const sessionOf = (tokens: client.TokenEndpointResponse, claims: Record<string, unknown>, prev: Session | null, at: number): Session => ({
      i: prev?.i ?? randomBytes(16).toString('base64url'),
      b: prev?.b ?? at,
      u: userOf(claims),
      h: claimHeaders(conf, claims),
      e: prev?.e ?? at + conf.sessionLifetimeMs,
      t: at + (tokens.expires_in ?? 300) * 1000,
      r: tokens.refresh_token ?? prev?.r ?? '',
    })

    /**
     * The ID token's claims, completed from the userinfo endpoint when a claim the rules or
     * the forwarded headers need is missing (providers may keep them out of the ID token
     * when an access token is issued, OIDC Core §5.4). One request per login or refresh.
     */
    const wanted = [...conf.forward.map(([claim]) => claim), ...conf.claimMatch.map(([claim]) => claim), ...(conf.emailDomains.length > 0 ? ['email'] : [])]
    const withUserInfo = async (cfg: client.Configuration, tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers): Promise<Record<string, unknown>> => {
      const claims: Record<string, unknown> = { ...tokens.claims() }
      if (wanted.every((k) => k in claims) || cfg.serverMetadata().userinfo_endpoint === undefined || typeof claims.sub !== 'string') return claims
      const info = await client.fetchUserInfo(cfg, tokens.access_token, claims.sub)
      for (const [k, v] of Object.entries(info)) if (!(k in claims)) claims[k] = v
      return claims
    }

    /**
     * A request without a (valid) session: a browser goes to the provider, an API client gets 401; both
     * get 503 while the provider does not answer (looked at again when the last look is old: Issuer.fresh).
     */
    const login = async (ctx: Ctx): Promise<Verdict> => {
      await issuer.fresh()
      const cfg = issuer.config
      if (cfg === null || !issuer.up) return answer(ctx, unavailable())
      if (ctx.header('accept').includes('application/json') || ctx.header('x-requested-with') !== '') return answer(ctx, unauthorized)
      const verifier = client.randomPKCECodeVerifier()
      const state = client.randomState()
      const nonce = client.randomNonce()
      const url = client.buildAuthorizationUrl(cfg, {
        redirect_uri: origin(ctx) + conf.redirectPath,
        scope: conf.scopes.join(' '),
        code_challenge: await client.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
        state,
        nonce,
      })
      const flow = sealer.sealLogin({ s: state, n: nonce, v: verifier, r: returnPath(ctx), e: Date.now() + LOGIN_TTL_MS })
      return answer(ctx, reply(302, `login at ${conf.issuer}`, ['location', url.href, 'set-cookie', setCookie(loginCookie, flow, LOGIN_TTL_MS / 1000, attrs(ctx))]))
    }

    const callback = async (ctx: Ctx): Promise<Verdict> => {
      const refused = (why: string): Verdict => {
        env.log.info('login refused', { reason: why })
        return answer(ctx, reply(401, formatError('LB_ERR_OIDC_CALLBACK', { reason: why })))
      }
      const flow = sealer.openLogin(cookieValue(ctx.header('cookie'), loginCookie))
      if (flow === null || flow.e < Date.now()) return refused('no login in progress here (its cookie is missing, expired or not ours)')
      const cfg = issuer.config
      if (cfg === null) return answer(ctx, unavailable())
      let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>
      let claims: Record<string, unknown>
      try {
        tokens = await client.authorizationCodeGrant(cfg, new URL(`${origin(ctx)}${ctx.path}?${ctx.query}`), {
          pkceCodeVerifier: flow.v, expectedState: flow.s, expectedNonce: flow.n, idTokenExpected: true,
        })
        claims = await withUserInfo(cfg, tokens)
      } catch (err) {
        if (isNetwork(err)) {
          issuer.unreachable()
          env.log.warn('identity provider failed during login', { issuer: conf.issuer, reason: reason(err) })
          return answer(ctx, reply(502, formatError('LB_ERR_OIDC_PROVIDER', { issuer: conf.issuer, reason: reason(err) })))
        }
        return refused(reason(err))
      }
      issuer.answered()
      const clear = setCookie(loginCookie, '', 0, attrs(ctx))
      const no = refusal(conf, claims)
      if (no !== '') {
        env.log.info('user not allowed', { user: userOf(claims), reason: no })
        return answer(ctx, reply(403, formatError('LB_ERR_OIDC_FORBIDDEN', { user: userOf(claims), reason: no }), ['set-cookie', clear]))
      }
      const s = sessionOf(tokens, claims, null, Date.now())
      return answer(ctx, reply(302, 'signed in', ['location', flow.r, 'set-cookie', setCookie(conf.cookieName, sealer.sealSession(s), lifetimeS, attrs(ctx)), 'set-cookie', clear]))
    }

    /**
     * Revokes the session of the request's cookie (on this node at once, then through the control plane
     * everywhere: the answer waits for it, within a bound), clears the cookie and goes through the
     * provider's end_session_endpoint when it has one (RP-initiated logout).
     */
    const logout = async (ctx: Ctx): Promise<Verdict> => {
      const v = cookieValue(ctx.header('cookie'), conf.cookieName)
      const s = v === '' ? null : cache.get(v, now())?.s ?? sealer.openSession(v)
      if (s !== null && s.e > Date.now()) {
        const [ka, kb] = revocationKey(sessionSubject(s.i))
        const r = { ka, kb, exp: Math.ceil(s.e / 1000), at: unixNow() }
        // a full table moves its epoch instead (RESET): the control plane logs it and tells the other nodes
        revocations.add(r, r.at)
        await env.shareRevocation?.(r)
        env.log.info('signed out', { user: s.u })
      }
      const cfg = issuer.config
      const back = conf.postLogoutRedirect.startsWith('/') ? origin(ctx) + conf.postLogoutRedirect : conf.postLogoutRedirect
      const to = cfg?.serverMetadata().end_session_endpoint !== undefined ? client.buildEndSessionUrl(cfg, { post_logout_redirect_uri: back }).href : back
      return answer(ctx, reply(302, 'signed out', ['location', to, 'set-cookie', setCookie(conf.cookieName, '', 0, attrs(ctx))]))
    }

    /**
     * New tokens for a session near their expiry: a new cookie on the response, or null when the
     * provider refuses (login again). A provider that cannot be reached does not end the session:
     * it carries on until its lifetime ends, and the refresh is tried again REFRESH_RETRY_MS later.
     */
    const refresh = (ctx: Ctx, old: string, s: Session): Promise<Session | null> => {
      let p = refreshing.get(s.r)
      if (p === undefined) {
        const run = async (): Promise<Session | null> => {
          const cfg = issuer.config
          if (cfg === null) return s
          try {
            const tokens = await client.refreshTokenGrant(cfg, s.r)
            issuer.answered()
            if (tokens.claims() === undefined) return { ...sessionOf(tokens, {}, s, Date.now()), u: s.u, h: s.h }
            const claims = await withUserInfo(cfg, tokens)
            const no = refusal(conf, claims)
            if (no === '') return sessionOf(tokens, claims, s, Date.now())
            env.log.info('user no longer allowed', { user: userOf(claims), reason: no })
            return null
          } catch (err) {
            env.log.info('token refresh failed', { user: s.u, reason: reason(err) })
            if (!isNetwork(err)) return null
            issuer.unreachable()
            return s
          }
        }
        p = run().finally(() => refreshing.delete(s.r))
        refreshing.set(s.r, p)
      }
      return p.then((next) => {
        if (next === s) cache.set(old, new Live(s, (now() + REFRESH_RETRY_MS) | 0), now(), s.e - Date.now())
        else if (next !== null) {
          const sealed = sealer.sealSession(next)
          cache.set(sealed, live(next), now(), next.e - Date.now())
          // requests still carrying the old cookie (sent before this answer arrived) ride on the new tokens
          cache.set(old, live(next), now(), next.e - Date.now())
          addResponseHeaders(ctx, ['set-cookie', setCookie(conf.cookieName, sealed, Math.max(1, Math.floor((next.e - Date.now()) / 1000)), attrs(ctx))])
        }
        return next
      })
    }

    const bearerAccept = (ctx: Ctx, s: Session): Verdict => {
      ctx.user = s.u
      sessions.forward(ctx, s.h)
      return NEXT
    }
    const bearer = (ctx: Ctx, token: string): Verdict | Promise<Verdict> => {
      const hit = bearerCache.get(token, now())
      if (hit !== undefined) return bearerAccept(ctx, hit)
      return issuer.verifyBearer(token).then((claims) => {
        const no = refusal(conf, claims)
        if (no !== '') return answer(ctx, reply(403, formatError('LB_ERR_OIDC_FORBIDDEN', { user: userOf(claims), reason: no })))
        const s: Session = { i: '', b: 0, u: userOf(claims), h: claimHeaders(conf, claims), e: claims.exp! * 1000, t: claims.exp! * 1000, r: '' }
        bearerCache.set(token, s, now(), s.e - Date.now())
        return bearerAccept(ctx, s)
      }, (err: unknown) => {
        if (env.log.debugEnabled) env.log.debug('bearer token refused', { reason: reason(err) })
        return answer(ctx, issuer.up ? badToken : unavailable())
      })
    }

    issuer.start()
    return {
      onRequest (ctx) {
        const path = ctx.path
        for (let i = 0; i < conf.skipPaths.length; i++) {
          const skip = conf.skipPaths[i]! // ends in "/": the path is under it, or is it without that "/"
          if (path.startsWith(skip) || (path.length === skip.length - 1 && skip.startsWith(path))) {
            sessions.forward(ctx, [])
            return NEXT
          }
        }
        if (path === conf.redirectPath) return callback(ctx)
        if (path === conf.logoutPath) return logout(ctx)
        const cookies = ctx.header('cookie')
        const v = cookies === '' ? '' : cookieValue(cookies, conf.cookieName)
        if (v !== '') {
          const t = now()
          let l = cache.get(v, t)
          if (l === undefined) {
            const s = sealer.openSession(v)
            if (s !== null && s.e > Date.now()) {
              l = live(s)
              cache.set(v, l, t, s.e - Date.now())
            }
          }
          if (l !== undefined && sessions.valid(l)) {
            if (l.s.r === '' || ((t - l.refreshAt) | 0) < 0) return accept(ctx, l)
            return refresh(ctx, v, l.s).then((s) => {
              const n = s === null ? null : s === l.s ? l : live(s)
              return n !== null && sessions.valid(n) ? accept(ctx, n) : login(ctx)
            })
          }
        }
        if (conf.bearer) {
          const auth = ctx.header('authorization')
          if (auth.length > 7 && auth.charCodeAt(6) === 32 && auth.slice(0, 6).toLowerCase() === 'bearer') return bearer(ctx, auth.slice(7).trim())
        }
        return login(ctx)
      },
      teardown () {
        issuer.stop()
      },
    }
  },
})
