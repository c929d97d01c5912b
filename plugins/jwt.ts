// jwt: bearer tokens verified against a JWK set file with `jose`: signature by
// a key of the set, algorithm within an allow-list of asymmetric algorithms
// (never "none"; never HMAC: a JWK set holds public keys, and an HMAC "secret"
// made of a public key is the classic forgery), exp and nbf with a small
// leeway, optional iss and aud. A missing token gets 401 with
// `WWW-Authenticate: Bearer realm="..."`, a bad one adds error="invalid_token"
// (RFC 6750 §3). Chosen claims go upstream as headers; a client-sent header of
// the same name never does.
//
// The key file is read when the config is validated: at start-up and on every
// reload (SIGHUP), so rotating keys is "write the file, kill -HUP". Verified
// tokens are cached (bounded, never past their exp) so a client repeating its
// token stays on the synchronous path; a new token costs one async signature check.
import { readFileSync } from 'node:fs'
import { type JSONWebKeySet, type JWTPayload, createLocalJWKSet, jwtVerify } from 'jose'
import { type Checker, type Ctx, type Reply, type Table, type Verdict, HANDLED, HEADER_NAME, NEXT, VerdictCache, addUpstreamHeaders, claimHeaderValue, checkRealm, definePlugin, dropRequestHeaders, formatError, join, now, resolvePath } from 'lb/plugin'

export const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const
const HMAC = ['HS256', 'HS384', 'HS512']

export interface JwtConf {
  /** absolute path of the JWK set, and its keys as read at validation */
  readonly jwksFile: string
  readonly jwks: JSONWebKeySet
  readonly algorithms: readonly string[]
  /** accepted issuers / audiences; empty = not checked */
  readonly issuers: readonly string[]
  readonly audiences: readonly string[]
  /** clock skew allowed on exp and nbf (ms). Default: 5 s */
  readonly leewayMs: number
  /** refuse tokens without exp. Default: true */
  readonly requireExp: boolean
  readonly realm: string
  /** [claim, header (lower-case)] pairs forwarded upstream */
  readonly forward: ReadonlyArray<readonly [string, string]>
  /** verified tokens are reused this long at most, never past their exp (ms). Default: 60 s */
  readonly cacheTtlMs: number
  /** verified tokens kept at most. Default: 4096 */
  readonly cacheSize: number
}

const RESERVED = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'authorization', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-proto'])
const PRIVATE_PARAMS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k']

function readJwks (c: Checker, path: string, file: string): JSONWebKeySet {
  const p = join(path, 'jwks_file')
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'))
  } catch (err) {
    c.problems.push(`${p}: cannot read a JSON Web Key Set from ${file}: ${(err as Error).message}`)
    return { keys: [] }
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys
  if (!Array.isArray(keys) || keys.length === 0) {
    c.problems.push(`${p}: ${file}: expected a JSON Web Key Set {"keys": [...]} with at least one key`)
    return { keys: [] }
  }
  keys.forEach((k: unknown, i) => {
    const o = k as Record<string, unknown> | null
    if (typeof o !== 'object' || o === null || typeof o.kty !== 'string') c.problems.push(`${p}: ${file}: keys[${i}] is not a JWK (no "kty")`)
    else if (o.kty === 'oct') c.problems.push(`${p}: ${file}: keys[${i}] is a symmetric ("oct") key; only public keys are accepted`)
    else if (PRIVATE_PARAMS.some((x) => x in o)) c.problems.push(`${p}: ${file}: keys[${i}] is a private key; publish only the public part`)
  })
  try {
    createLocalJWKSet(parsed as JSONWebKeySet)
  } catch (err) {
    c.problems.push(`${p}: ${file}: ${(err as Error).message}`)
  }
  return parsed as JSONWebKeySet
}

function stringOrList (c: Checker, t: Table, key: string, path: string): string[] {
  const v = t[key]
  if (typeof v === 'string') return [v]
  return c.strings(t, key, path, [])
}

function validate (c: Checker, t: Table, path: string, baseDir: string): JwtConf {
  c.table(t, path, ['jwks_file', 'algorithms', 'issuer', 'audience', 'leeway', 'require_exp', 'realm', 'forward_claims', 'cache_ttl', 'cache_size'])
  const file = c.string(t, 'jwks_file', path)
  const jwksFile = file === '' ? '' : resolvePath(baseDir, file)
  const jwks = jwksFile === '' ? { keys: [] } : readJwks(c, path, jwksFile)
  const algorithms = c.strings(t, 'algorithms', path, ASYMMETRIC)
  algorithms.forEach((a, i) => {
    const p = join(join(path, 'algorithms'), i)
    if (a.toLowerCase() === 'none') c.problems.push(`${p}: "none" is never accepted: an unsigned token proves nothing`)
    else if (HMAC.includes(a)) c.problems.push(`${p}: ${a} is refused: HMAC needs a shared secret, and a JWK set holds public keys (accepting it invites forged tokens)`)
    else if (!(ASYMMETRIC as readonly string[]).includes(a)) c.problem(p, `one of ${ASYMMETRIC.join(', ')}`, a)
  })
  if (algorithms.length === 0) c.problem(join(path, 'algorithms'), 'at least one algorithm', t.algorithms)
  const leewayMs = c.duration(t, 'leeway', path, 5_000)
  if (leewayMs > 300_000) c.problem(join(path, 'leeway'), 'a duration of at most "5m"', t.leeway)
  const realm = c.string(t, 'realm', path, 'lb')
  checkRealm(c, join(path, 'realm'), realm)
  const fp = join(path, 'forward_claims')
  const forward: Array<[string, string]> = []
  for (const [claim, header] of Object.entries(c.table(t.forward_claims, fp, null))) {
    if (typeof header !== 'string' || !HEADER_NAME.test(header)) c.problem(join(fp, claim), 'a header name', header)
    else if (RESERVED.has(header.toLowerCase())) c.problems.push(`${join(fp, claim)}: ${header} is managed by the proxy and cannot carry a claim`)
    else forward.push([claim, header.toLowerCase()])
  }
  return {
    jwksFile,
    jwks,
    algorithms,
    issuers: stringOrList(c, t, 'issuer', path),
    audiences: stringOrList(c, t, 'audience', path),
    leewayMs: Math.min(leewayMs, 300_000),
    requireExp: c.bool(t, 'require_exp', path, true),
    realm,
    forward,
    cacheTtlMs: c.duration(t, 'cache_ttl', path, 60_000),
    cacheSize: c.int(t, 'cache_size', path, 4096, 0, 1_000_000),
  }
}

interface Verified {
  readonly user: string
  /** flat [header, value, ...] of forwarded claims */
  readonly headers: readonly string[]
}

export default definePlugin<JwtConf>({
  name: 'jwt',
  api: 1,
  validate,
  create (conf, env) {
    const keys = createLocalJWKSet(conf.jwks)
    const options = {
      algorithms: [...conf.algorithms],
      clockTolerance: Math.round(conf.leewayMs / 1000),
      ...(conf.issuers.length > 0 ? { issuer: [...conf.issuers] } : {}),
      ...(conf.audiences.length > 0 ? { audience: [...conf.audiences] } : {}),
      ...(conf.requireExp ? { requiredClaims: ['exp'] } : {}),
    }
    const cache = new VerdictCache<Verified>(conf.cacheSize, conf.cacheTtlMs)
    const drop = conf.forward.map(([, h]) => h)
    const challenge = (error: boolean): Reply => Object.freeze({
      status: 401,
      headers: Object.freeze(['www-authenticate', `Bearer realm="${conf.realm}"${error ? ', error="invalid_token"' : ''}`,
        'content-type', 'text/plain']) as string[],
      body: formatError('LB_ERR_UNAUTHORIZED') + '\n',
    }) as Reply
    const missing = challenge(false)
    const invalid = challenge(true)

    const accept = (ctx: Ctx, v: Verified): Verdict => {
      ctx.user = v.user
      if (drop.length > 0) {
        dropRequestHeaders(ctx, drop)
        if (v.headers.length > 0) addUpstreamHeaders(ctx, v.headers)
      }
      return NEXT
    }
    const verified = (payload: JWTPayload, token: string): Verified => {
      const headers: string[] = []
      for (const [claim, header] of conf.forward) {
        const v = payload[claim]
        if (v !== undefined) headers.push(header, claimHeaderValue(v))
      }
      const result = { user: typeof payload.sub === 'string' ? payload.sub : '', headers }
      // never cached past exp (plus the leeway that verification granted)
      const ttl = payload.exp === undefined ? conf.cacheTtlMs : payload.exp * 1000 + conf.leewayMs - Date.now()
      cache.set(token, result, now(), ttl)
      return result
    }

    return {
      onRequest (ctx) {
        const auth = ctx.header('authorization')
        if (auth.length < 8 || auth.charCodeAt(6) !== 32 || auth.slice(0, 6).toLowerCase() !== 'bearer') {
          ctx.reply = missing
          return HANDLED
        }
        const token = auth.slice(7).trim()
        // keyed by the token itself: it carries its own signature, and entries never outlive its exp
        const hit = cache.get(token, now())
        if (hit !== undefined) return accept(ctx, hit)
        return jwtVerify(token, keys, options).then(({ payload }) => accept(ctx, verified(payload, token)), (err: unknown) => {
          if (env.log.debugEnabled) env.log.debug('token refused', { path: ctx.path, reason: (err as Error).message })
          ctx.reply = invalid
          return HANDLED
        })
      },
    }
  },
})
