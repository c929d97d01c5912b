// circuitBreaker: as Traefik's, stops sending requests to a service that is
// failing. Its expression (circuit-expression.ts) is evaluated at most every
// check_period over the requests that passed it in the last 10 s
// (circuit-window.ts); when it holds, the breaker trips: for
// fallback_duration every request is answered response_code (503) by lb;
// then, for recovery_duration, a share of requests growing from 0 to all
// passes again, and the breaker trips again if the expression holds. State and
// measures are per worker, as Traefik keeps them per instance.
import { type Checker, type Ctx, type Reply, type Table, HANDLED, NEXT, atEnd, definePlugin, formatError, join } from 'lb/plugin'
import { performance } from 'node:perf_hooks'
import { type Predicate, parseExpression } from './circuit-expression.js'
import { CircuitWindow } from './circuit-window.js'

export interface CircuitBreakerConf {
  readonly expression: string
  readonly checkPeriodMs: number
  readonly fallbackMs: number
  readonly recoveryMs: number
  readonly responseCode: number
}

const NETWORK = new Set(['LB_ERR_UPSTREAM_CONNECT', 'LB_ERR_UPSTREAM_RESET', 'LB_ERR_UPSTREAM_TIMEOUT', 'LB_ERR_UPSTREAM_PROTOCOL'])

function validate (c: Checker, t: Table, path: string): CircuitBreakerConf {
  c.table(t, path, ['expression', 'check_period', 'fallback_duration', 'recovery_duration', 'response_code'])
  const expression = c.string(t, 'expression', path)
  if (typeof t.expression === 'string') {
    const p = parseExpression(expression)
    if (typeof p === 'string') c.problem(join(path, 'expression'), `an expression as Traefik's, like "NetworkErrorRatio() > 0.5" (${p})`, expression)
  }
  return {
    expression,
    checkPeriodMs: c.duration(t, 'check_period', path, 100, 1),
    fallbackMs: c.duration(t, 'fallback_duration', path, 10_000, 1),
    recoveryMs: c.duration(t, 'recovery_duration', path, 10_000, 0),
    responseCode: c.int(t, 'response_code', path, 503, 200, 599),
  }
}

const STANDBY = 0
const TRIPPED = 1
const RECOVERING = 2

export default definePlugin<CircuitBreakerConf>({
  name: 'circuitBreaker',
  api: 1,
  validate,
  create (conf, env) {
    const holds = parseExpression(conf.expression) as Predicate // validate accepted it
    const window = new CircuitWindow()
    const open: Reply = Object.freeze({
      status: conf.responseCode,
      headers: Object.freeze(['content-type', 'text/plain']) as string[],
      body: formatError('LB_ERR_CIRCUIT_OPEN', { middleware: env.name }) + '\n',
    }) as Reply
    let state = STANDBY
    /** ms (performance.now()): when the state last changed, and the last evaluation */
    let since = 0
    let checked = 0
    // one function for every request: atEnd adds no closure
    const record = (ctx: Ctx): void => window.record(Date.now(), ctx.status, NETWORK.has(ctx.errorCode), performance.now() - ctx.t0)
    const trip = (t: number): void => {
      state = TRIPPED
      since = t
      window.reset()
      env.log.warn('circuit breaker tripped: requests are answered by lb', { middleware: env.name, expression: conf.expression, for_ms: conf.fallbackMs })
      env.setStatus?.('warning', `open: ${conf.expression}`)
    }
    return {
      onRequest (ctx) {
        const t = performance.now()
        if (state === TRIPPED) {
          if (t - since < conf.fallbackMs) {
            ctx.reply = open
            return HANDLED
          }
          state = RECOVERING
          since = t
          checked = t
        }
        if (state === RECOVERING) {
          const share = conf.recoveryMs === 0 ? 1 : (t - since) / conf.recoveryMs
          if (share >= 1) {
            state = STANDBY
            env.log.info('circuit breaker closed again', { middleware: env.name })
            env.setStatus?.('enabled', '')
          } else if (Math.random() >= share) {
            ctx.reply = open
            return HANDLED
          }
        }
        if (t - checked >= conf.checkPeriodMs) {
          checked = t
          if (holds(window.at(Date.now()))) {
            trip(t)
            ctx.reply = open
            return HANDLED
          }
        }
        atEnd(ctx, record)
        return NEXT
      },
    }
  },
})
