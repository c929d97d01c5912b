// A route's middleware chain, compiled once per config generation: arrays of
// the hooks that exist (null when there are none, so the hot path tests one
// field). Hooks run synchronously; a hook that returns a Promise switches the
// rest of that request's chain to the async path. A hook that throws fails
// only its request, with 500 and a log line.
import { type Hooks, type ResponseHead, type Verdict, HANDLED, NEXT } from '../../plugin.js'
import type { Logger } from '../../log.js'
import { ERRORS, formatError } from '../../errors.js'
import type { Ctx, Reply } from './context.js'

type RequestHook = NonNullable<Hooks['onRequest']>
type ResponseHook = NonNullable<Hooks['onResponse']>

export interface Chain {
  readonly onRequest: readonly RequestHook[] | null
  readonly onResponse: readonly ResponseHook[] | null
  /** middleware name per onRequest hook, for error messages */
  readonly requestNames: readonly string[]
  readonly responseNames: readonly string[]
}

export const EMPTY_CHAIN: Chain = { onRequest: null, onResponse: null, requestNames: [], responseNames: [] }

export function compileChain (instances: ReadonlyArray<{ name: string, hooks: Hooks }>): Chain {
  const req = instances.filter((i) => i.hooks.onRequest !== undefined)
  const res = instances.filter((i) => i.hooks.onResponse !== undefined)
  return {
    onRequest: req.length === 0 ? null : req.map((i) => i.hooks.onRequest!),
    onResponse: res.length === 0 ? null : res.map((i) => i.hooks.onResponse!),
    requestNames: req.map((i) => i.name),
    responseNames: res.map((i) => i.name),
  }
}

/** The answer for a request whose middleware `name` failed (threw, rejected, or could not be created). */
export function pluginErrorReply (name: string): Reply {
  return {
    status: ERRORS.LB_ERR_PLUGIN.status,
    headers: ['content-type', 'text/plain'],
    body: formatError('LB_ERR_PLUGIN', { middleware: name }) + '\n',
  }
}

function pluginFailed (ctx: Ctx, log: Logger, name: string, err: unknown): Verdict {
  log.error('middleware failed', { middleware: name, path: ctx.path, error: err instanceof Error ? err.stack ?? err.message : String(err) })
  ctx.reply = pluginErrorReply(name)
  return HANDLED
}

/** Runs onRequest hooks from index `from`; sync unless a hook returns a Promise. */
export function runRequestHooks (chain: Chain, ctx: Ctx, log: Logger, from = 0): Verdict | Promise<Verdict> {
  const hooks = chain.onRequest!
  for (let i = from; i < hooks.length; i++) {
    let r: Verdict | Promise<Verdict>
    try {
      r = hooks[i]!(ctx)
    } catch (err) {
      return pluginFailed(ctx, log, chain.requestNames[i]!, err)
    }
    if (typeof r === 'object' && r !== null && typeof r.then === 'function') {
      return r.then(
        (v) => (v === NEXT ? runRequestHooks(chain, ctx, log, i + 1) : v),
        (err: unknown) => pluginFailed(ctx, log, chain.requestNames[i]!, err)
      )
    }
    if (r !== NEXT) return r
  }
  return NEXT
}

/** Runs onResponse hooks; a throwing hook is logged and skipped (the head is already on its way). */
export function runResponseHooks (chain: Chain, ctx: Ctx, head: ResponseHead, log: Logger): void {
  const hooks = chain.onResponse!
  for (let i = 0; i < hooks.length; i++) {
    try {
      hooks[i]!(ctx, head)
    } catch (err) {
      log.error('middleware failed on response', { middleware: chain.responseNames[i], error: err instanceof Error ? err.message : String(err) })
    }
  }
}
