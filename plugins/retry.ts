// retry: as Traefik's, sets how many times a request is tried (`attempts`, the
// first try included) on the router's service when a server fails before any
// byte of its answer, and the wait before the first retry (`initial_interval`,
// doubled before each next one). What may be retried is lb's one policy
// (README "services.X.retries"): any request nothing of which reached the
// server, an idempotent one whose body is held whole otherwise; never after the
// answer began. Without this middleware a request gets the service's `retries`.
import { type Checker, type Table, NEXT, definePlugin } from 'lb/plugin'

export interface RetryConf {
  /** tries in all, the first included (Traefik's attempts) */
  readonly attempts: number
  /** ms before the first retry, doubled after each; 0 = at once */
  readonly initialIntervalMs: number
}

function validate (c: Checker, t: Table, path: string): RetryConf {
  c.table(t, path, ['attempts', 'initial_interval'])
  return { attempts: c.int(t, 'attempts', path, undefined, 1, 11), initialIntervalMs: c.duration(t, 'initial_interval', path, 0, 0, 60_000) }
}

export default definePlugin<RetryConf>({
  name: 'retry',
  api: 1,
  validate,
  create (conf) {
    const retries = conf.attempts - 1
    const interval = conf.initialIntervalMs
    return {
      onRequest (ctx) {
        ctx.retryLimit = retries
        ctx.retryIntervalMs = interval
        return NEXT
      },
    }
  },
})
