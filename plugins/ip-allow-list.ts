// ipAllowList: only sources within `source_range` (IPv4 and IPv6 addresses or
// CIDRs) pass; others get 403 (Traefik's ipAllowList). The source is the peer
// address, or X-Forwarded-For from trusted proxies (core/net/source.ts). The
// matcher is core/net/ip.ts allowList, the same one the status service's
// `allow` list compiles to.
import { type Checker, type Reply, type SourceConf, type Table, HANDLED, NEXT, SOURCE_KEYS, checkCidrs, checkSource, compileCidrs, compileSource, definePlugin, formatError, join } from 'lb/plugin'

export interface IpAllowListConf {
  readonly sourceRange: readonly string[]
  /** status of the refusal. Default: 403 */
  readonly rejectStatus: number
  readonly source: SourceConf
}

function validate (c: Checker, t: Table, path: string): IpAllowListConf {
  c.table(t, path, ['source_range', 'reject_status', ...SOURCE_KEYS])
  const sourceRange = checkCidrs(c, t, 'source_range', path, [])
  if (sourceRange.length === 0) c.problem(join(path, 'source_range'), 'a non-empty list of addresses or CIDRs (required)', t.source_range)
  return {
    sourceRange,
    rejectStatus: c.int(t, 'reject_status', path, 403, 400, 599),
    source: checkSource(c, t, path),
  }
}

export default definePlugin<IpAllowListConf>({
  name: 'ipAllowList',
  api: 1,
  validate,
  create (conf) {
    const allowed = compileCidrs(conf.sourceRange)
    const sourceOf = compileSource(conf.source)
    const reply: Reply = Object.freeze({
      status: conf.rejectStatus,
      headers: Object.freeze(['content-type', 'text/plain']) as string[],
      body: formatError('LB_ERR_FORBIDDEN') + '\n',
    }) as Reply
    return {
      onRequest (ctx) {
        if (allowed(sourceOf(ctx))) return NEXT
        ctx.reply = reply
        return HANDLED
      },
    }
  },
})
