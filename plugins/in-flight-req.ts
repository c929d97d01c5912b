// inFlightReq: at most `amount` requests in flight per source at once, as
// Traefik's; more get 429 at once. The count is exact across workers: one
// entry per source in the shared rate table (acquire/release under its set
// lock), taken in onRequest and given back when the request ends, however it
// ends (atEnd: answered, failed, the client gone; a WebSocket while its tunnel
// is open). The source is the client address, or X-Forwarded-For from trusted
// proxies only, as rateLimit's (core/net/source.ts).
import { type Checker, type Ctx, type Reply, type Table, HANDLED, KeyHasher, NEXT, RateTable, SOURCE_KEYS, atEnd, checkSource, compileSource, definePlugin, formatError, keyA, keyB, keySpace, now, type SourceConf } from 'lb/plugin'

export interface InFlightReqConf {
  readonly amount: number
  readonly source: SourceConf
}

/** An entry is forgotten this long after its last change: what a worker killed with requests in flight leaks, at most. */
const TTL_MS = 3_600_000

function validate (c: Checker, t: Table, path: string): InFlightReqConf {
  c.table(t, path, ['amount', ...SOURCE_KEYS])
  return { amount: c.int(t, 'amount', path, undefined, 1, 1_000_000), source: checkSource(c, t, path) }
}

export default definePlugin<InFlightReqConf>({
  name: 'inFlightReq',
  api: 1,
  validate,
  create (conf, env) {
    const table = new RateTable(env.shm.i32)
    const sourceOf = compileSource(conf.source)
    const h = new KeyHasher()
    const { seedA, seedB, owner } = keySpace(`inFlightReq\u0000${env.name}`)
    const full: Reply = Object.freeze({
      status: 429,
      headers: Object.freeze(['content-type', 'text/plain']) as string[],
      body: formatError('LB_ERR_TOO_MANY_IN_FLIGHT', { amount: conf.amount }) + '\n',
    }) as Reply
    return {
      onRequest (ctx: Ctx) {
        const source = sourceOf(ctx)
        h.hash(source)
        const ka = keyA(h.a, seedA)
        const kb = keyB(h.b, seedB)
        if (table.acquire(ka, kb, now(), conf.amount, TTL_MS, owner, source) === 0) {
          ctx.reply = full
          return HANDLED
        }
        atEnd(ctx, () => table.release(ka, kb, now()))
        return NEXT
      },
    }
  },
})
