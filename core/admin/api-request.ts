// How the config API reads a request, before a handler acts on it: the query
// checks the Data Plane API's swagger layer makes (unknown parameters, the
// version/transaction pair, types) and the JSON body. Every refusal is an
// ApiError answered as {code, message}.
import { ApiError } from './config-api/config-store.js'
import type { Request } from './http-server.js'

/** query parameters every write takes (the Data Plane API's version/transaction pair, and force_reload) */
export const WRITE_PARAMS = ['version', 'transaction_id', 'force_reload']
/** and the ones naming the parent backend of a server */
export const SERVER_PARAMS = ['backend', 'parent_name']

/**
 * The checks the Data Plane API makes on the query before a handler runs. On
 * a write, a query parameter the route does not take is a 400, never silently
 * dropped. A transaction_id on a route outside /configuration (which has no
 * transactions) is refused rather than ignored, which would apply at once a
 * change meant to be staged.
 */
export function checkQuery (req: Request, allowed: readonly string[] | null, transactional: boolean): void {
  const tx = req.query.get('transaction_id')
  if (allowed !== null) {
    for (const k of req.query.keys()) {
      if (!allowed.includes(k)) throw new ApiError(400, `unknown query parameter ${JSON.stringify(k)}: this endpoint takes ${allowed.join(', ')}`)
    }
    const fr = req.query.get('force_reload')
    if (fr !== null && fr !== 'true' && fr !== 'false') throw new ApiError(422, `force_reload in query must be of type boolean: ${JSON.stringify(fr)}`, 601)
    if (tx !== null && req.query.get('version') !== null) throw new ApiError(400, 'both version and transaction specified, specify only one', 400)
    if (tx !== null && fr === 'true') throw new ApiError(400, 'Both force_reload and transaction specified, specify only one', 400)
  }
  if (tx !== null && !transactional) throw new ApiError(400, `unknown query parameter "transaction_id": ${req.path} has no transactions`)
}

/** `?version=N`: absent → undefined; not an integer → 422 as go-openapi does. */
export function versionParam (req: Request): number | undefined {
  const v = req.query.get('version')
  if (v === null) return undefined
  if (!/^\d+$/.test(v)) throw new ApiError(422, `version in query must be of type integer: ${JSON.stringify(v)}`, 601)
  return Number(v)
}

export function parseBody (req: Request, what: string): unknown {
  // required, not assumed: a body without a type is what a browser sends cross-site without asking first (browser-guard.ts)
  const type = req.headers['content-type']
  if (type === undefined || !/^application\/json\b/i.test(type)) {
    throw new ApiError(415, `unsupported media type ${JSON.stringify((type ?? '(none)').split(';')[0])}, only [application/json] are allowed`)
  }
  if (req.body.trim() === '') throw new ApiError(400, `parsing ${what} body from "" failed, because EOF`)
  try {
    return JSON.parse(req.body)
  } catch (err) {
    throw new ApiError(400, `parsing ${what} body from "" failed, because ${(err as Error).message}`)
  }
}

export function backendParam (req: Request): string {
  const b = req.query.get('backend') ?? req.query.get('parent_name')
  if (b === null || b === '') throw new ApiError(422, 'backend in query is required', 602)
  return b
}
