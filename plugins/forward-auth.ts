// forwardAuth: asks an authentication server (Authelia, Authentik,
// oauth2-proxy...) about every request, as Traefik's forwardAuth: a GET to
// `address` with the request's headers (or only `auth_request_headers`) and
// X-Forwarded-Method, -Proto, -Host, -Uri and -For describing it. A 2xx lets
// the request through, with `auth_response_headers` copied from the answer
// onto it (replacing the client's own); any other answer goes back to the
// client as the server gave it (a 302 to the login page, a 401). The server
// unreachable, or its answer over max_response_body_size: 500, as Traefik.
//
// The X-Forwarded-* a client sent are dropped unless trust_forward_header:
// the server decides on them, so a client must not be able to write them.
// The request body is not sent (Traefik's default, forwardBody = false).
import { type Checker, type Ctx, type Table, type Verdict, HANDLED, NEXT, addResponseHeaders, addUpstreamHeaders, definePlugin, dropRequestHeaders, formatError, join, parseSize } from 'lb/plugin'
import { Pool } from 'undici'

export interface ForwardAuthConf {
  readonly address: string
  readonly trustForwardHeader: boolean
  /** lower-case names copied from a 2xx answer onto the upstream request */
  readonly authResponseHeaders: readonly string[]
  /** lower-case names of the request headers sent to the server; empty = all but hop-by-hop */
  readonly authRequestHeaders: readonly string[]
  /** lower-case cookie names whose Set-Cookie of a 2xx answer go to the client's response */
  readonly addAuthCookiesToResponse: readonly string[]
  /** bytes of the server's answer body kept at most (-1: no bound) */
  readonly maxResponseBodySize: number
  /** ms the server has to answer the head */
  readonly timeoutMs: number
}

const KEYS = ['address', 'trust_forward_header', 'auth_response_headers', 'auth_request_headers', 'add_auth_cookies_to_response', 'max_response_body_size', 'timeout']
// not forwarded either way (RFC 9110 §7.6.1), and what the request line / the answer framing carry
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'content-length', 'host'])
const FORWARDED = ['x-forwarded-method', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-uri', 'x-forwarded-for']
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

function headerNames (c: Checker, t: Table, key: string, path: string): string[] {
  const names = c.strings(t, key, path, [])
  names.forEach((n, i) => { if (!TOKEN.test(n)) c.problem(`${join(path, key)}[${i}]`, 'a header name', n) })
  return names.map((n) => n.toLowerCase())
}

function validate (c: Checker, t: Table, path: string): ForwardAuthConf {
  c.table(t, path, KEYS)
  const address = c.string(t, 'address', path)
  if (typeof t.address === 'string') {
    let u: URL | null = null
    try { u = new URL(address) } catch {}
    if (u === null || (u.protocol !== 'http:' && u.protocol !== 'https:') || u.hash !== '' || u.username !== '') {
      c.problem(join(path, 'address'), 'an http:// or https:// URL of the authentication server, without #fragment or user', address)
    }
  }
  let max = -1
  if (t.max_response_body_size !== undefined) {
    max = typeof t.max_response_body_size === 'number' && t.max_response_body_size === -1 ? -1 : parseSize(String(t.max_response_body_size))
    if (!Number.isInteger(max) || max < -1) c.problem(join(path, 'max_response_body_size'), 'a size like "64k" or -1 (no bound)', t.max_response_body_size)
  } else {
    max = 1 << 20
  }
  return {
    address,
    trustForwardHeader: c.bool(t, 'trust_forward_header', path, false),
    authResponseHeaders: headerNames(c, t, 'auth_response_headers', path),
    authRequestHeaders: headerNames(c, t, 'auth_request_headers', path),
    addAuthCookiesToResponse: c.strings(t, 'add_auth_cookies_to_response', path, []),
    maxResponseBodySize: max,
    timeoutMs: c.duration(t, 'timeout', path, 30_000, 1),
  }
}

/** The headers of the request to the server, flat [name, value, ...]. */
function authHeaders (conf: ForwardAuthConf, ctx: Ctx): string[] {
  const out: string[] = []
  const h = ctx.headers
  const only = conf.authRequestHeaders
  for (let i = 0; i < h.length; i += 2) {
    const n = h[i]!
    if (HOP.has(n) || (!conf.trustForwardHeader && FORWARDED.includes(n))) continue
    if (only.length > 0 && !only.includes(n)) continue
    out.push(n, h[i + 1]!)
  }
  const keep = (n: string): boolean => conf.trustForwardHeader && ctx.header(n) !== '' && (only.length === 0 || only.includes(n))
  if (!keep('x-forwarded-method')) out.push('x-forwarded-method', ctx.method)
  if (!keep('x-forwarded-proto')) out.push('x-forwarded-proto', ctx.proto)
  if (!keep('x-forwarded-host')) out.push('x-forwarded-host', ctx.header('host'))
  if (!keep('x-forwarded-uri')) out.push('x-forwarded-uri', ctx.query === '' ? ctx.path : `${ctx.path}?${ctx.query}`)
  // the client's chain is extended only when trusted; the peer is always last
  const xff = conf.trustForwardHeader ? ctx.header('x-forwarded-for') : ''
  const i = out.indexOf('x-forwarded-for')
  if (i >= 0 && i % 2 === 0) out.splice(i, 2)
  out.push('x-forwarded-for', xff === '' ? ctx.remoteAddress : `${xff}, ${ctx.remoteAddress}`)
  return out
}

const cookieName = (setCookie: string): string => setCookie.slice(0, Math.max(0, setCookie.indexOf('='))).trim()

function fail (ctx: Ctx, reason: string): Verdict {
  ctx.reply = { status: 500, headers: ['content-type', 'text/plain'], body: formatError('LB_ERR_FORWARD_AUTH', { reason }) + '\n' }
  return HANDLED
}

export default definePlugin<ForwardAuthConf>({
  name: 'forwardAuth',
  api: 1,
  validate,
  create (conf, env) {
    const url = new URL(conf.address)
    // one pool per instance: keep-alive connections to the server, as lb's upstream pools
    const pool = new Pool(url.origin, { connections: 64, headersTimeout: conf.timeoutMs, bodyTimeout: conf.timeoutMs })
    const target = url.pathname + url.search
    return {
      async onRequest (ctx) {
        let res
        try {
          res = await pool.request({ method: 'GET', path: target, headers: authHeaders(conf, ctx) })
        } catch (e) {
          env.log.warn('forwardAuth: the authentication server failed', { address: conf.address, err: (e as Error).message })
          return fail(ctx, `${conf.address}: ${(e as Error).message}`)
        }
        const status = res.statusCode
        const got = res.headers
        if (status >= 200 && status < 300) {
          res.body.resume() // drained: the connection goes back to the pool
          if (conf.authResponseHeaders.length > 0) {
            dropRequestHeaders(ctx, conf.authResponseHeaders)
            const add: string[] = []
            for (const n of conf.authResponseHeaders) {
              const v = got[n]
              if (v !== undefined) add.push(n, Array.isArray(v) ? v.join(', ') : v)
            }
            if (add.length > 0) addUpstreamHeaders(ctx, add)
          }
          if (conf.addAuthCookiesToResponse.length > 0) {
            const sc = got['set-cookie']
            const add: string[] = []
            for (const c of sc === undefined ? [] : Array.isArray(sc) ? sc : [sc]) {
              if (conf.addAuthCookiesToResponse.includes(cookieName(c))) add.push('set-cookie', c)
            }
            if (add.length > 0) addResponseHeaders(ctx, add)
          }
          return NEXT
        }
        // not allowed: the server's answer is the client's
        const chunks: Buffer[] = []
        let size = 0
        try {
          for await (const chunk of res.body) {
            size += (chunk as Buffer).length
            if (conf.maxResponseBodySize >= 0 && size > conf.maxResponseBodySize) {
              res.body.destroy()
              return fail(ctx, `${conf.address} answered ${status} with a body over max_response_body_size (${conf.maxResponseBodySize} bytes)`)
            }
            chunks.push(chunk as Buffer)
          }
        } catch (e) {
          return fail(ctx, `${conf.address}: ${(e as Error).message}`)
        }
        const headers: string[] = []
        for (const [n, v] of Object.entries(got)) {
          if (HOP.has(n) || v === undefined) continue
          for (const x of Array.isArray(v) ? v : [v]) headers.push(n, x)
        }
        ctx.reply = { status, headers, body: Buffer.concat(chunks, size).toString('utf8') }
        return HANDLED
      },
      teardown () { void pool.close() },
    }
  },
})
