// The oidc middleware's config: keys, defaults and checks (conf/lb.toml
// documents each). Secret files are read here, at start-up and on every reload,
// so a missing or wrong file is a config error `lb check` reports; the secrets
// go to the workers in the config and are never logged or shown (the dashboard
// API redacts them).
import { readFileSync } from 'node:fs'
import { type Checker, type Table, HEADER_NAME, join, resolvePath } from 'lb/plugin'

export interface OidcConf {
  /** the provider's issuer URL, without a trailing slash (discovery: ISSUER/.well-known/openid-configuration) */
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  /** callback path on every host the middleware guards. Default: "/oauth2/callback" */
  readonly redirectPath: string
  /** Default: ["openid", "profile", "email"] */
  readonly scopes: readonly string[]
  /** the 32-byte cookie key, base64 */
  readonly cookieSecret: string
  /** Default: "_lb_oidc" */
  readonly cookieName: string
  /** Default: "" (host-only cookie) */
  readonly cookieDomain: string
  /** ms. Default: 12 h */
  readonly sessionLifetimeMs: number
  /** refresh the tokens this long before they expire (ms). Default: 1 min */
  readonly refreshBeforeMs: number
  /** lower-case; empty = any */
  readonly emailDomains: readonly string[]
  /** claim → accepted values: the claim (a string or a list) must hold one of them, for every claim listed */
  readonly claimMatch: ReadonlyArray<readonly [string, readonly string[]]>
  /** [claim, header (lower-case)]. Default: sub → X-Auth-Request-User, email → X-Auth-Request-Email */
  readonly forward: ReadonlyArray<readonly [string, string]>
  /** Default: "/oauth2/sign_out" */
  readonly logoutPath: string
  /** where the browser lands after logout: a path on the same host or an absolute URL. Default: "/" */
  readonly postLogoutRedirect: string
  /** paths served without login, each ending in "/": one matches itself without that "/" and every path below it (skipped) */
  readonly skipPaths: readonly string[]
  /** accept `Authorization: Bearer` JWT access tokens of the same issuer. Default: true */
  readonly bearer: boolean
  /** the audience bearer tokens must carry. Default: the client id */
  readonly bearerAudience: string
  /** forward lb's session cookie to the backend in the Cookie header (it is a bearer credential: whoever holds it is the user). Default: false */
  readonly forwardSessionCookie: boolean
  /** provider metadata and keys are fetched again this often (ms). Default: 1 h */
  readonly discoveryRefreshMs: number
  /** time-out of each request to the provider (ms). Default: 5 s */
  readonly timeoutMs: number
}

const KEYS = ['issuer', 'client_id', 'client_secret', 'client_secret_file', 'redirect_path', 'scopes', 'cookie_secret_file', 'cookie_name',
  'cookie_domain', 'session_lifetime', 'refresh_before', 'allowed_email_domains', 'claim_match', 'forward_claims', 'logout_path',
  'post_logout_redirect', 'skip_paths', 'bearer', 'bearer_audience', 'forward_session_cookie', 'discovery_refresh', 'timeout']
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const RESERVED = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'upgrade', 'te', 'trailer', 'keep-alive', 'authorization', 'cookie'])
const MAX_LIFETIME_MS = 20 * 24 * 3_600_000
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|\[::1\]|localhost)$/

function readSecret (c: Checker, path: string, key: string, baseDir: string, file: string): Buffer | null {
  const abs = resolvePath(baseDir, file)
  try {
    return readFileSync(abs)
  } catch (err) {
    c.problems.push(`${join(path, key)}: cannot read ${abs}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
    return null
  }
}

/** The cookie key: the file's 32 bytes, or the base64 of 32 bytes (what `openssl rand -base64 32` writes). */
function cookieKey (c: Checker, path: string, raw: Buffer): string {
  const text = raw.toString('latin1').replace(/\r?\n$/, '')
  if (text.length === 32) return Buffer.from(text, 'latin1').toString('base64')
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) {
    const b = Buffer.from(text, 'base64')
    if (b.length === 32) return b.toString('base64')
  }
  c.problems.push(`${join(path, 'cookie_secret_file')}: the cookie secret must be exactly 32 bytes (or their base64), found ${text.length} bytes; make one with: openssl rand -base64 32 > FILE`)
  return ''
}

function path0 (c: Checker, t: Table, key: string, path: string, def: string): string {
  const v = c.string(t, key, path, def)
  if (!v.startsWith('/') || v.startsWith('//') || /[?#\s]/.test(v)) c.problem(join(path, key), 'a path starting with "/" (no query)', v)
  return v
}

export function validateOidc (c: Checker, t: Table, path: string, baseDir: string): OidcConf {
  c.table(t, path, KEYS)
  const issuer = c.string(t, 'issuer', path).replace(/\/+$/, '')
  if (issuer !== '') {
    let u: URL | null = null
    try { u = new URL(issuer) } catch {}
    if (u === null || (u.protocol !== 'https:' && u.protocol !== 'http:')) c.problem(join(path, 'issuer'), 'an https:// URL', t.issuer)
    else if (u.protocol === 'http:' && !LOOPBACK.test(u.hostname)) c.problems.push(`${join(path, 'issuer')}: ${issuer}: plain http is accepted only for a provider on loopback; use https://`)
  }
  const clientId = c.string(t, 'client_id', path)
  let clientSecret = c.string(t, 'client_secret', path, '')
  const secretFile = c.string(t, 'client_secret_file', path, '')
  if (secretFile !== '') {
    if (clientSecret !== '') c.problems.push(`${join(path, 'client_secret')}: give client_secret or client_secret_file, not both`)
    clientSecret = readSecret(c, path, 'client_secret_file', baseDir, secretFile)?.toString('utf8').trim() ?? ''
    if (clientSecret === '' && !c.problems.some((p) => p.startsWith(join(path, 'client_secret_file')))) c.problems.push(`${join(path, 'client_secret_file')}: the file is empty`)
  } else if (clientSecret === '') c.problem(join(path, 'client_secret'), 'the client secret (client_secret or client_secret_file)', t.client_secret)
  const keyFile = c.string(t, 'cookie_secret_file', path)
  const keyRaw = keyFile === '' ? null : readSecret(c, path, 'cookie_secret_file', baseDir, keyFile)
  const cookieSecret = keyRaw === null ? '' : cookieKey(c, path, keyRaw)
  const cookieName = c.string(t, 'cookie_name', path, '_lb_oidc')
  if (!COOKIE_NAME.test(cookieName)) c.problem(join(path, 'cookie_name'), 'a cookie name (a token)', cookieName)
  const cookieDomain = c.string(t, 'cookie_domain', path, '')
  if (cookieDomain !== '' && !/^\.?[a-z0-9.-]+$/i.test(cookieDomain)) c.problem(join(path, 'cookie_domain'), 'a domain name', cookieDomain)
  const scopes = c.strings(t, 'scopes', path, ['openid', 'profile', 'email'])
  if (!scopes.includes('openid')) c.problems.push(`${join(path, 'scopes')}: must include "openid" (no ID token without it)`)
  const emailDomains = c.strings(t, 'allowed_email_domains', path, []).map((d) => d.toLowerCase().replace(/^@/, ''))
  const cm = join(path, 'claim_match')
  const claimMatch: Array<[string, string[]]> = []
  for (const [claim, v] of Object.entries(c.table(t.claim_match, cm, null))) {
    const values = typeof v === 'string' ? [v] : c.strings({ [claim]: v }, claim, cm, [])
    if (values.length === 0) c.problem(join(cm, claim), 'a value or a list of accepted values', v)
    claimMatch.push([claim, values])
  }
  const fp = join(path, 'forward_claims')
  const forward: Array<[string, string]> = []
  const fwd = t.forward_claims === undefined ? { sub: 'X-Auth-Request-User', email: 'X-Auth-Request-Email' } : c.table(t.forward_claims, fp, null)
  for (const [claim, header] of Object.entries(fwd)) {
    if (typeof header !== 'string' || !HEADER_NAME.test(header)) c.problem(join(fp, claim), 'a header name', header)
    else if (RESERVED.has(header.toLowerCase())) c.problems.push(`${join(fp, claim)}: ${header} is managed by the proxy and cannot carry a claim`)
    else forward.push([claim, header.toLowerCase()])
  }
  const redirectPath = path0(c, t, 'redirect_path', path, '/oauth2/callback')
  const logoutPath = path0(c, t, 'logout_path', path, '/oauth2/sign_out')
  // whole segments: "/health" skips /health and /health/x, never /healthz nor /health-admin
  const skipPaths = c.strings(t, 'skip_paths', path, []).map((p) => p.endsWith('/') ? p : p + '/')
  skipPaths.forEach((p, i) => { if (!p.startsWith('/')) c.problem(join(join(path, 'skip_paths'), i), 'a path prefix starting with "/"', p) })
  const sessionLifetimeMs = c.duration(t, 'session_lifetime', path, 12 * 3_600_000, 60_000)
  if (sessionLifetimeMs > MAX_LIFETIME_MS) c.problem(join(path, 'session_lifetime'), 'a duration of at most "480h" (20 days)', t.session_lifetime)
  const postLogoutRedirect = c.string(t, 'post_logout_redirect', path, '/')
  if (!/^(\/(?!\/)|https?:\/\/)/.test(postLogoutRedirect)) c.problem(join(path, 'post_logout_redirect'), 'a path starting with "/" or an http(s) URL', postLogoutRedirect)
  return {
    issuer,
    clientId,
    clientSecret,
    redirectPath,
    scopes,
    cookieSecret,
    cookieName,
    cookieDomain,
    sessionLifetimeMs: Math.min(sessionLifetimeMs, MAX_LIFETIME_MS),
    refreshBeforeMs: c.duration(t, 'refresh_before', path, 60_000),
    emailDomains,
    claimMatch,
    forward,
    logoutPath,
    postLogoutRedirect,
    skipPaths,
    bearer: c.bool(t, 'bearer', path, true),
    bearerAudience: c.string(t, 'bearer_audience', path, clientId),
    forwardSessionCookie: c.bool(t, 'forward_session_cookie', path, false),
    discoveryRefreshMs: c.duration(t, 'discovery_refresh', path, 3_600_000, 1_000),
    timeoutMs: c.duration(t, 'timeout', path, 5_000, 100),
  }
}
