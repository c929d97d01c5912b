// basicAuth: HTTP Basic authentication against htpasswd entries (Traefik's
// basicAuth): `users = ["user:hash", ...]` inline and/or `users_file` (one
// "user:hash" per line, # comments), hashes as htpasswd writes them
// (core/auth/htpasswd.ts). A missing or wrong credential gets 401 with
// `WWW-Authenticate: Basic realm="..."`.
//
// Successful checks are cached for `cache_ttl` (bounded to `cache_size`
// entries), keyed by the SHA-256 of the Authorization header, so bcrypt's
// cost (milliseconds, by design) is paid once per client per TTL and repeated
// requests stay on the synchronous path. Every check costs the same whatever
// the name, known or not (core/auth/password-table.ts), so timing does not
// reveal which names exist.
// bcrypt runs on a thread of its own (core/auth/bcrypt-thread.ts): a check
// waits there, and past 64 waiting a new one gets 503 (LB_ERR_AUTH_BUSY).
import { hash as digest } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { type Checker, type Ctx, type HtpasswdEntry, type Reply, type Table, type Verdict, HANDLED, HEADER_NAME, NEXT, VerdictCache, addUpstreamHeaders, checkRealm, PasswordTable, definePlugin, dropRequestHeaders, formatError, join, now, parseEntry, resolvePath } from 'lb/plugin'

export interface BasicAuthConf {
  readonly users: readonly HtpasswdEntry[]
  /** realm in the challenge. Default: "lb" */
  readonly realm: string
  /** do not forward the Authorization header upstream. Default: false */
  readonly removeHeader: boolean
  /** header (lower-case) that carries the authenticated user upstream; '' = none. Default: '' */
  readonly headerField: string
  /** how long a successful check is reused (ms). Default: 60 s */
  readonly cacheTtlMs: number
  /** successful checks kept at most. Default: 1024 */
  readonly cacheSize: number
}

const MAX_CACHE_TTL_MS = 3_600_000

function validate (c: Checker, t: Table, path: string, baseDir: string): BasicAuthConf {
  c.table(t, path, ['users', 'users_file', 'realm', 'remove_header', 'header_field', 'cache_ttl', 'cache_size'])
  const users: HtpasswdEntry[] = []
  const seen = new Set<string>()
  const add = (line: string, where: string): void => {
    const e = parseEntry(line)
    if (typeof e === 'string') c.problems.push(`${where}: ${e}`)
    else if (seen.has(e.user)) c.problems.push(`${where}: user ${JSON.stringify(e.user)} is defined twice`)
    else {
      seen.add(e.user)
      users.push(e)
    }
  }
  c.strings(t, 'users', path, []).forEach((line, i) => add(line, join(join(path, 'users'), i)))
  const file = c.string(t, 'users_file', path, '')
  if (file !== '') {
    const abs = resolvePath(baseDir, file)
    let text = ''
    try {
      text = readFileSync(abs, 'utf8')
    } catch (err) {
      c.problems.push(`${join(path, 'users_file')}: cannot read ${abs}: ${(err as Error).message}`)
    }
    text.split(/\r?\n/).forEach((line, i) => {
      if (line.trim() !== '' && !line.trimStart().startsWith('#')) add(line.trim(), `${join(path, 'users_file')}: ${abs} line ${i + 1}`)
    })
  }
  if (users.length === 0 && !c.problems.some((p) => p.startsWith(path))) c.problem(join(path, 'users'), 'at least one "user:hash" in users or users_file', t.users)
  const realm = c.string(t, 'realm', path, 'lb')
  checkRealm(c, join(path, 'realm'), realm)
  const headerField = c.string(t, 'header_field', path, '')
  if (headerField !== '' && !HEADER_NAME.test(headerField)) c.problem(join(path, 'header_field'), 'a header name', headerField)
  const cacheTtlMs = c.duration(t, 'cache_ttl', path, 60_000)
  if (cacheTtlMs > MAX_CACHE_TTL_MS) c.problem(join(path, 'cache_ttl'), 'a duration of at most "1h"', t.cache_ttl)
  return {
    users,
    realm,
    removeHeader: c.bool(t, 'remove_header', path, false),
    headerField: headerField.toLowerCase(),
    cacheTtlMs: Math.min(cacheTtlMs, MAX_CACHE_TTL_MS),
    cacheSize: c.int(t, 'cache_size', path, 1024, 0, 1_000_000),
  }
}

/**
 * "Basic <base64>" → "user:password" text, or null. The scheme is case-insensitive (RFC 9110 §11.1).
 * The base64 is decoded strictly (RFC 4648 §4, as Go's base64.StdEncoding in Traefik): padded, and
 * nothing Buffer's lenient decoder would skip (junk after the padding, bad or missing padding, other
 * characters). Only the canonical text re-encodes to itself, so it is all the check needs.
 */
function credentials (auth: string): string | null {
  if (auth.length < 7 || auth.charCodeAt(5) !== 32 || auth.slice(0, 5).toLowerCase() !== 'basic') return null
  const b64 = auth.slice(6).trim()
  const raw = Buffer.from(b64, 'base64')
  if (raw.toString('base64') !== b64) return null
  return raw.toString('utf8')
}

export default definePlugin<BasicAuthConf>({
  name: 'basicAuth',
  api: 1,
  validate,
  create (conf) {
    const users = new PasswordTable(conf.users)
    const cache = new VerdictCache<string>(conf.cacheSize, conf.cacheTtlMs)
    /** bcrypt checks in flight, by credential digest: concurrent requests with the same credentials share one */
    const pending = new Map<string, Promise<boolean>>()
    const denied: Reply = Object.freeze({
      status: 401,
      headers: Object.freeze(['www-authenticate', `Basic realm="${conf.realm}"`, 'content-type', 'text/plain']) as string[],
      body: formatError('LB_ERR_UNAUTHORIZED') + '\n',
    }) as Reply
    const drop = [...(conf.removeHeader ? ['authorization'] : []), ...(conf.headerField !== '' ? [conf.headerField] : [])]
    const { headerField } = conf

    const accept = (ctx: Ctx, user: string): Verdict => {
      ctx.user = user
      if (drop.length > 0) dropRequestHeaders(ctx, drop) // a client-sent header_field never reaches the upstream
      if (headerField !== '') addUpstreamHeaders(ctx, [headerField, user])
      return NEXT
    }
    const deny = (ctx: Ctx): Verdict => {
      ctx.reply = denied
      return HANDLED
    }

    return {
      onRequest (ctx) {
        const auth = ctx.header('authorization')
        if (auth === '') return deny(ctx)
        const key = digest('sha256', auth, 'base64')
        const cached = cache.get(key, now())
        if (cached !== undefined) return accept(ctx, cached)
        const cred = credentials(auth)
        const colon = cred === null ? -1 : cred.indexOf(':')
        if (colon < 0) return deny(ctx)
        const name = cred!.slice(0, colon)
        const password = cred!.slice(colon + 1)
        const ok = users.checkSync(name, password)
        if (ok !== null) {
          if (!ok) return deny(ctx)
          cache.set(key, name, now())
          return accept(ctx, name)
        }
        let check = pending.get(key)
        if (check === undefined) {
          check = users.check(name, password).then((good) => {
            pending.delete(key)
            if (good) cache.set(key, name, now())
            return good
          }, (err: unknown) => {
            pending.delete(key)
            throw err
          })
          pending.set(key, check)
        }
        return check.then((good) => (good ? accept(ctx, name) : deny(ctx)), (err: { code?: string, message: string }) => {
          if (err.code !== 'LB_ERR_AUTH_BUSY') throw err
          ctx.reply = { status: 503, headers: ['retry-after', '1', 'content-type', 'text/plain'], body: err.message + '\n' }
          return HANDLED
        })
      },
    }
  },
})
