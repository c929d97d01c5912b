// A middleware's new path for a request (stripPrefix, addPrefix, replacePath,
// replacePathRegex): decided by the same normalizePath, under the same entry
// point policy, as the client's own path (DataPlane.handle), so no rewrite can
// hand the backend a path lb would have refused from a client ("..", an
// encoded "/", a raw space...). The request was routed before the rewrite and
// stays on its router (as in Traefik); the middlewares after it, the access
// log and the upstream request line all read ctx.path, so they see the
// rewritten path, the one the backend gets.
import { ERRORS, formatError } from '../../errors.js'
import { HANDLED, NEXT, type Verdict } from '../../plugin.js'
import type { Ctx } from './context.js'
import { DEFAULT_POLICY, normalizePath } from './request-path.js'

/**
 * Sets ctx.path to the normal form of `path`, or answers 400 LB_ERR_BAD_PATH
 * (the reason says it is the rewritten path) and returns HANDLED. Allocates
 * nothing when `path` is already normal.
 */
export function rewritePath (ctx: Ctx, path: string): Verdict {
  const p = normalizePath(path, ctx.pathPolicy ?? DEFAULT_POLICY)
  if (typeof p === 'string') {
    ctx.path = p
    return NEXT
  }
  ctx.reply = {
    status: ERRORS.LB_ERR_BAD_PATH.status,
    headers: ['content-type', 'text/plain'],
    body: formatError('LB_ERR_BAD_PATH', { reason: `the path a middleware rewrote it to: ${p.reason}` }) + '\n',
  }
  return HANDLED
}
