// The HTTP side of the management surfaces: a node:http listener in the
// control plane serving route tables. Each surface declares its routes as data,
// { method, path, help, mutates, handler } (envoy admin.cc); GET /help on every
// listener is generated from the tables, and mutating calls are logged.
import http from 'node:http'
import { reportFault } from '../control/faults.js'
import { isLbError } from '../errors.js'
import type { Logger } from '../log.js'
import type { Authenticator } from './auth.js'
import { browserRefusal, localOnly } from './browser-guard.js'

/** A reply: JSON value, or text with its own content type. */
export interface Answer {
  status: number
  headers?: Record<string, string>
  /** JSON-encoded unless `text` is set */
  json?: unknown
  text?: string
  contentType?: string
}

export interface Request {
  readonly method: string
  readonly path: string
  readonly query: URLSearchParams
  /** values of {name} segments of the route path, decoded */
  readonly params: Readonly<Record<string, string>>
  readonly headers: http.IncomingHttpHeaders
  /** raw body text ('' when none) */
  readonly body: string
  /** authenticated user ('' for a token or no authentication) */
  readonly user: string
}

export interface Route {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE'
  /** path with {name} segments, e.g. /v2/services/lb/configuration/backends/{name} */
  readonly path: string
  readonly help: string
  readonly mutates: boolean
  readonly handler: (req: Request) => Answer | Promise<Answer>
}

export interface Surface {
  readonly name: string
  readonly routes: readonly Route[]
  /** how errors of this surface look (the Data Plane API and Traefik differ) */
  readonly notFound: (path: string) => Answer
  readonly methodNotAllowed: (path: string) => Answer
  readonly internalError: (err: Error) => Answer
}

const MAX_BODY = 1024 * 1024

interface Compiled { readonly route: Route, readonly re: RegExp, readonly names: string[], readonly surface: Surface }

function compile (surface: Surface, route: Route): Compiled {
  const names: string[] = []
  const re = new RegExp('^' + route.path.split('/').map((seg) => {
    const m = /^\{(\w+)\}$/.exec(seg)
    if (m === null) return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    names.push(m[1]!)
    return '([^/]+)'
  }).join('/') + '$')
  return { route, re, names, surface }
}

export function helpText (surfaces: readonly Surface[]): string {
  const lines: string[] = []
  for (const s of surfaces) {
    lines.push(`${s.name}:`)
    for (const r of s.routes) lines.push(`  ${`${r.method} ${r.path}`.padEnd(62)} ${r.mutates ? '(mutates) ' : ''}${r.help}`)
  }
  return lines.join('\n') + '\n'
}

export interface ListenerOptions {
  readonly name: string
  readonly host: string
  readonly port: number
  readonly surfaces: readonly Surface[]
  /** null = no authentication on this listener */
  readonly auth: Authenticator | null
  readonly log: Logger
  /** requests are held until this resolves (lb is ready); connections are accepted meanwhile */
  readonly ready?: Promise<void>
}

function send (res: http.ServerResponse, a: Answer, head: boolean): void {
  const body = a.text ?? (a.json === undefined ? '' : JSON.stringify(a.json) + '\n')
  const type = a.contentType ?? (a.text !== undefined ? 'text/plain; charset=utf-8' : 'application/json')
  res.writeHead(a.status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...a.headers })
  res.end(head ? undefined : body)
}

function badRequest (message: string): Answer {
  return { status: 400, json: { code: 400, message } }
}

/** The request target as a URL, or null when it is not one (an absolute-form target can be invalid). */
function parseUrl (target: string | undefined): URL | null {
  try {
    return new URL(target ?? '/', 'http://x')
  } catch {
    return null
  }
}

/** The {name} segments of a matched path, percent-decoded; null when an escape is malformed (%E9, %zz). */
function decodeParams (names: readonly string[], m: RegExpExecArray): Record<string, string> | null {
  const params: Record<string, string> = {}
  try {
    names.forEach((n, i) => { params[n] = decodeURIComponent(m[i + 1]!) })
  } catch {
    return null
  }
  return params
}

/** Starts a listener; resolves once it listens (rejects on EADDRINUSE and the like). */
export function startListener (o: ListenerOptions): Promise<http.Server> {
  const table = o.surfaces.flatMap((s) => s.routes.map((r) => compile(s, r)))
  const help = helpText(o.surfaces)
  const primary = o.surfaces[0]!
  const local = localOnly(o.host, o.auth !== null)
  let open = o.ready === undefined
  void o.ready?.then(() => { open = true })
  const server = http.createServer((req, res) => {
    // no exception of a handler (or of this code) may end the process: answer 500, log, count
    if (open) serve(req, res).catch((err: unknown) => failed(req, res, err))
    else void o.ready!.then(() => serve(req, res)).catch((err: unknown) => failed(req, res, err))
  })
  const failed = (req: http.IncomingMessage, res: http.ServerResponse, err: unknown): void => {
    reportFault(`${o.name} listener`, err, { method: req.method, path: req.url?.slice(0, 200) })
    req.resume()
    if (res.headersSent) res.destroy()
    else send(res, { status: 500, json: { code: 500, message: 'internal error' } }, req.method === 'HEAD')
  }
  const serve = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const url = parseUrl(req.url)
    if (url === null) {
      req.resume()
      send(res, badRequest(`invalid request target ${JSON.stringify(req.url?.slice(0, 200))}`), req.method === 'HEAD')
      return
    }
    const method = req.method === 'HEAD' ? 'GET' : req.method ?? 'GET'
    const head = req.method === 'HEAD'
    const refused = browserRefusal(req.headers.host, req.headers.origin, local)
    if (refused !== '') {
      req.resume()
      send(res, { status: 403, json: { code: 403, message: refused } }, head)
      return
    }
    let user = ''
    if (o.auth !== null) {
      let who: string | null
      try {
        who = await o.auth.check(req.headers.authorization)
      } catch (err) {
        if (!isLbError(err) || err.code !== 'LB_ERR_AUTH_BUSY') throw err
        req.resume()
        send(res, { status: 503, headers: { 'retry-after': '1' }, json: { code: 503, message: err.message } }, head)
        return
      }
      if (who === null) {
        req.resume()
        send(res, { status: 401, headers: { 'www-authenticate': 'Basic realm="lb"' }, json: { code: 401, message: 'authentication required' } }, head)
        return
      }
      user = who
    }
    if (url.pathname === '/help' && method === 'GET') {
      req.resume()
      send(res, { status: 200, text: help }, head)
      return
    }
    let found: Compiled | null = null
    let params: Record<string, string> = {}
    let pathMatched: Surface | null = null
    for (const c of table) {
      const m = c.re.exec(url.pathname)
      if (m === null) continue
      pathMatched ??= c.surface
      if (c.route.method !== method) continue
      const decoded = decodeParams(c.names, m)
      if (decoded === null) {
        req.resume()
        send(res, badRequest(`malformed percent-encoding in path ${JSON.stringify(url.pathname.slice(0, 200))}`), head)
        return
      }
      found = c
      params = decoded
      break
    }
    if (found === null) {
      req.resume()
      send(res, pathMatched !== null ? pathMatched.methodNotAllowed(url.pathname) : (o.surfaces.find((s) => s.routes.some((r) => url.pathname.startsWith(r.path.split('{')[0]!.replace(/\/$/, '')))) ?? primary).notFound(url.pathname), head)
      return
    }
    const route = found.route
    const surface = found.surface
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (d: Buffer) => {
      size += d.length
      if (size <= MAX_BODY) chunks.push(d)
    })
    req.on('end', () => {
      if (size > MAX_BODY) {
        send(res, { status: 413, json: { code: 413, message: `request body larger than ${MAX_BODY} bytes` } }, head)
        return
      }
      const r: Request = { method, path: url.pathname, query: url.searchParams, params, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), user }
      Promise.resolve().then(() => route.handler(r)).then((a) => {
        if (route.mutates) o.log.info('admin change', { listener: o.name, method, path: url.pathname + url.search, user, status: a.status })
        send(res, a, head)
      }, (err: Error) => {
        reportFault(`${o.name} handler`, err, { path: url.pathname })
        send(res, surface.internalError(err), head)
      }).catch((err: unknown) => failed(req, res, err))
    })
  }
  server.keepAliveTimeout = 5_000
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(o.port, o.host, () => {
      server.off('error', reject)
      server.on('error', (err) => o.log.error('listener error', { listener: o.name, error: err.message }))
      resolve(server)
    })
  })
}

export function closeListener (server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections()
  })
}
