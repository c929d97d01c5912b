// What the oidc middleware knows of its provider: the discovery metadata
// (openid-client's Configuration) and the signing keys (JWKS), fetched when the
// instance is created and again every `discovery_refresh`, on a timer that
// teardown stops. A provider that cannot be reached does not fail the config:
// the instance keeps the metadata it had, says why on the dashboard, and
// retries with back-off (1 s doubling to 30 s); meanwhile a request that needs
// a login answers 503 (a browser and an API client alike), since sending a
// browser to a provider that does not answer helps no one. A request that
// needs a login also loads the metadata again, and waits for it, when the last
// look at the provider is older than FRESH_MS (fresh()): a provider that went
// away is noticed by the next login, not at the next discovery_refresh.
//
// Keys: jose's remote key set verifies bearer tokens (refetched when a token
// names an unknown kid, at most every 5 s so made-up kids cannot flood the provider); each load hands the same keys to
// openid-client, which checks the ID token's signature with them at the
// callback (enableNonRepudiationChecks) and refetches on an unknown kid too.
import { type JWTPayload, createRemoteJWKSet, jwtVerify } from 'jose'
import type { Logger } from 'lb/plugin'
import * as client from 'openid-client'
import type { OidcConf } from './oidc-config.js'

const RETRY_MIN_MS = 1_000
const RETRY_MAX_MS = 30_000
const KID_COOLDOWN_MS = 5_000
/** a login looks at the provider again when the last look is older than this (ms): at most one load per this per worker */
const FRESH_MS = 10_000

export type Report = (status: 'enabled' | 'warning', message: string) => void

/** A provider error's reason in one line, without the secrets a request may carry. */
export function reason (err: unknown): string {
  const e = err as { message?: string, cause?: unknown, error?: string, error_description?: string, code?: string }
  if (typeof e?.error === 'string') return e.error_description !== undefined ? `${e.error}: ${e.error_description}` : e.error
  const base = String(e?.message ?? err).split('\n')[0]!
  // openid-client wraps the precise reason (a bad state, a nonce mismatch, a refused connection) as the cause
  const cause = e?.cause as { code?: string, message?: string, error?: string } | undefined
  if (typeof cause?.error === 'string' || (typeof cause?.message === 'string' && cause.message !== base)) return `${base}: ${reason(cause)}`
  return typeof cause?.code === 'string' ? `${base} (${cause.code})` : base
}

export class Issuer {
  readonly #conf: OidcConf
  readonly #log: Logger
  readonly #report: Report
  /** the provider's metadata with our client; null until the first discovery succeeds */
  config: client.Configuration | null = null
  /** why the last load failed ('' after a success) */
  error = ''
  #keys: ReturnType<typeof createRemoteJWKSet> | null = null
  #timer: NodeJS.Timeout | null = null
  #retryMs = RETRY_MIN_MS
  #stopped = false
  /** the load in progress (one at a time) */
  #loading: Promise<void> | null = null
  /** Date.now() when the last load started, or the provider last answered a request of a login or refresh */
  #lastLook = 0

  constructor (conf: OidcConf, log: Logger, report: Report) {
    this.#conf = conf
    this.#log = log
    this.#report = report
  }

  start (): void {
    this.#report('warning', `loading provider metadata from ${this.#conf.issuer}`)
    void this.#reload()
  }

  /** Whether a login can go to the provider now: its metadata loaded and its last load succeeded. */
  get up (): boolean {
    return this.config !== null && this.error === ''
  }

  /**
   * Resolves once the provider's state is fresh: looked at within FRESH_MS while it answers, within
   * RETRY_MIN_MS while it does not (a provider back is noticed by the next login, not at the end of the
   * back-off); at most one load at a time.
   */
  fresh (): Promise<void> {
    if (this.#stopped) return Promise.resolve()
    if (this.#loading === null && Date.now() - this.#lastLook < (this.up ? FRESH_MS : RETRY_MIN_MS)) return Promise.resolve()
    return this.#reload()
  }

  /** The provider answered a request of a login or a refresh: its state is fresh. */
  answered (): void {
    this.#lastLook = Date.now()
  }

  /** The provider could not be reached for a login or a refresh: the next login looks again. */
  unreachable (): void {
    this.#lastLook = 0
  }

  stop (): void {
    this.#stopped = true
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
  }

  /**
   * Verifies a bearer access token: signed by the provider's keys, its issuer, the configured audience, not
   * expired, and not an ID token: one issued to this client for a login (it carries a nonce, or Keycloak's
   * typ "ID") has the same issuer and audience, but says who logged in, not what an API may be asked.
   */
  verifyBearer (token: string): Promise<JWTPayload> {
    const keys = this.#keys
    const cfg = this.config
    if (keys === null || cfg === null) return Promise.reject(new Error('provider metadata not loaded'))
    return jwtVerify(token, keys, { issuer: cfg.serverMetadata().issuer, audience: this.#conf.bearerAudience, clockTolerance: 5, requiredClaims: ['exp'] })
      .then((r) => {
        if (r.payload.nonce !== undefined || r.payload.typ === 'ID') throw new Error('an ID token is not an access token')
        return r.payload
      })
  }

  #reload (): Promise<void> {
    this.#loading ??= this.#load().finally(() => { this.#loading = null })
    return this.#loading
  }

  async #load (): Promise<void> {
    const c = this.#conf
    this.#lastLook = Date.now()
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    try {
      const insecure = c.issuer.startsWith('http:') // validated: loopback only
      const cfg = await client.discovery(new URL(c.issuer), c.clientId, c.clientSecret, undefined,
        { timeout: Math.ceil(c.timeoutMs / 1000), ...(insecure ? { execute: [client.allowInsecureRequests] } : {}) })
      client.enableNonRepudiationChecks(cfg)
      const uri = cfg.serverMetadata().jwks_uri
      if (uri === undefined) throw new Error('the provider metadata has no jwks_uri')
      const keys = createRemoteJWKSet(new URL(uri), { timeoutDuration: c.timeoutMs, cooldownDuration: KID_COOLDOWN_MS, cacheMaxAge: c.discoveryRefreshMs })
      await keys.reload()
      const jwks = keys.jwks()
      if (jwks !== undefined) client.setJwksCache(cfg, { jwks, uat: Math.floor(Date.now() / 1000) })
      if (this.#stopped) return
      this.config = cfg
      this.#keys = keys
      this.error = ''
      this.#retryMs = RETRY_MIN_MS
      const m = cfg.serverMetadata()
      this.#report('enabled', `provider metadata loaded from ${m.issuer} at ${new Date().toISOString()} (${jwks?.keys.length ?? 0} signing keys${m.end_session_endpoint !== undefined ? ', RP-initiated logout' : ''})`)
      this.#schedule(c.discoveryRefreshMs)
    } catch (err) {
      if (this.#stopped) return
      this.error = reason(err)
      const delay = this.#retryMs
      this.#retryMs = Math.min(RETRY_MAX_MS, this.#retryMs * 2)
      const held = '; logins answer 503 until it loads (sessions carry on)'
      this.#log.warn('identity provider unavailable', { issuer: c.issuer, reason: this.error, retryInMs: delay })
      this.#report('warning', `provider ${c.issuer} unavailable: ${this.error}${held}; retrying in ${Math.round(delay / 1000)}s`)
      this.#schedule(delay)
    }
  }

  #schedule (ms: number): void {
    if (this.#stopped) return
    this.#timer = setTimeout(() => { void this.#reload() }, ms)
    this.#timer.unref()
  }
}

/** A failure to reach the provider (connection, time-out, 5xx), as opposed to a refusal by it. */
export function isNetwork (err: unknown): boolean {
  const e = err as { name?: string, message?: string, status?: number, cause?: unknown }
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError' || (e?.name === 'TypeError' && e.message === 'fetch failed')) return true
  if (typeof e?.status === 'number' && e.status >= 500) return true
  return e?.cause !== undefined && e.cause !== err && isNetwork(e.cause)
}
