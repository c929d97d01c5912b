// How lb's configuration reads in Traefik's API words: durations in Go's
// time.Duration form ("1s", "50s", "1m30s", never "1000ms"), middleware
// options under Traefik's names where Traefik has the same option (rateLimit
// average/period/burst, compress minResponseBodyBytes, ...), lb's own options
// under their TOML names, and the TCP routers and services of lb's TCP entry
// points (one router per entry point, Traefik's catch-all HostSNI(`*`)).
import type { Config } from '../../config/load.js'
import type { MiddlewareConf } from '../../config/dynamic.js'

type Obj = Record<string, unknown>

/** A duration in ms as Go's time.Duration.String() writes it: "0s", "500ms", "1.5s", "1m0s", "1h2m3s". */
export function goDuration (ms: number): string {
  if (ms === 0) return '0s'
  if (ms < 1000) return `${trim(ms)}ms`
  const h = Math.floor(ms / 3_600_000)
  const m = Math.floor((ms % 3_600_000) / 60_000)
  const s = trim((ms % 60_000) / 1000)
  if (h > 0) return `${h}h${m}m${s}s`
  if (m > 0) return `${m}m${s}s`
  return `${s}s`
}

function trim (n: number): string {
  return String(Math.round(n * 1e6) / 1e6)
}

/**
 * Password hashes and secrets never leave the process (they invite offline cracking): any option whose name
 * speaks of one (a third-party plugin's apiKey, clientSecret, redisPassword, accessToken, privateKey...).
 */
const SECRET_KEYS = /pass|secret|token|jwks|credential|private|hash|key$/i
/** Header names whose values are credentials (the headers middleware's requestSet / responseSet pairs). */
const SECRET_HEADERS = /auth|cookie|key|token|secret|pass/i

/** [name, value, ...] with the values of credential headers redacted. */
function headerPairs (v: unknown): unknown {
  if (!Array.isArray(v)) return v
  return v.map((x: unknown, i) => (i % 2 === 1 && SECRET_HEADERS.test(String(v[i - 1]))) ? '<redacted>' : x)
}

/** Generic view of a plugin's validated options: secrets redacted, `xxxMs` durations as Go durations under `xxx`. */
function generic (v: unknown): unknown {
  if (Array.isArray(v)) return v.map(generic)
  if (typeof v !== 'object' || v === null) return v
  const out: Obj = {}
  for (const [k, x] of Object.entries(v)) {
    if (SECRET_KEYS.test(k)) out[k] = '<redacted>'
    else if (k === 'requestSet' || k === 'responseSet') out[k] = headerPairs(x)
    else if (/Ms$/.test(k) && typeof x === 'number') out[k.slice(0, -2)] = goDuration(x)
    else out[k] = generic(x)
  }
  return out
}

interface Source { trustedProxies: readonly string[], depth: number }

/** Traefik's sourceCriterion: the peer address, or the X-Forwarded-For hop `depth` behind trusted proxies. */
function sourceCriterion (s: Source | undefined): Obj | undefined {
  if (s === undefined || s.trustedProxies.length === 0) return undefined
  return { ipStrategy: { depth: s.depth }, trustedProxies: [...s.trustedProxies] }
}

/** One middleware's options as the API shows them. */
export function middlewareOptions (m: MiddlewareConf): unknown {
  const c = (m.conf ?? {}) as Obj
  switch (m.type) {
    case 'rateLimit': {
      const src = sourceCriterion(c.source as Source | undefined)
      const base = src === undefined ? {} : { sourceCriterion: src }
      const periodMs = c.periodMs as number
      if (c.algorithm === 'tokenBucket') {
        return { average: Math.round(((c.ratePerSec as number) * periodMs) / 1000), period: goDuration(periodMs), burst: c.burst, ...base }
      }
      if (c.algorithm === 'leakyBucket') return { algorithm: c.algorithm, rate: `${trim(c.ratePerSec as number)}r/s`, burst: c.burst, nodelay: c.nodelay, ...base }
      return { algorithm: c.algorithm, limit: c.limit, period: goDuration(periodMs), ...base }
    }
    case 'compress':
      return {
        encodings: c.encodings,
        minResponseBodyBytes: c.minBytes,
        ...((c.excluded as unknown[] | undefined)?.length ? { excludedContentTypes: c.excluded } : {}),
        ...((c.included as unknown[] | undefined)?.length ? { includedContentTypes: c.included } : {}),
      }
    case 'oidc':
      return {
        issuer: c.issuer,
        clientId: c.clientId,
        clientSecret: '<redacted>',
        cookieSecret: '<redacted>',
        ...generic(Object.fromEntries(Object.entries(c).filter(([k]) => !['issuer', 'clientId', 'clientSecret', 'cookieSecret'].includes(k)))) as Obj,
      }
    case 'basicAuth':
      return {
        users: ((c.users ?? []) as Array<{ user: string }>).map((u) => `${u.user}:<redacted>`),
        realm: c.realm,
        removeHeader: c.removeHeader,
        ...(c.headerField !== undefined && c.headerField !== '' ? { headerField: c.headerField } : {}),
      }
    case 'ipAllowList': {
      const src = sourceCriterion(c.source as Source | undefined)
      return { sourceRange: c.sourceRange, rejectStatusCode: c.rejectStatus, ...(src === undefined ? {} : { ipStrategy: src.ipStrategy }) }
    }
    case 'buffering': // Traefik's fields are omitempty: what is 0, false or empty is not shown
    case 'errors':
      return Object.fromEntries(Object.entries(c).filter(([, v]) => v !== 0 && v !== false && v !== '' &&
        !(typeof v === 'object' && v !== null && Object.keys(v).length === 0)))
    case 'chain': // the names as configured, as a router's middlewares are shown
      return { middlewares: c.middlewares }
    default:
      return generic(c)
  }
}

/** Traefik's TCP routers: one per TCP entry point, catching every connection for its service. */
export function tcpRouters (config: Config): Obj[] {
  return config.entrypoints.filter((e) => e.protocol === 'tcp').map((e) => ({
    entryPoints: [e.name],
    service: e.service,
    rule: 'HostSNI(`*`)',
    status: 'enabled',
    using: [e.name],
    name: `${e.name}@file`,
    provider: 'file',
    priorityStr: '0',
  }))
}
