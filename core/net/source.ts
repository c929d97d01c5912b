// Which address a request comes from, for rate limits and allow lists. The
// peer address is the source unless the peer is a trusted proxy: then
// X-Forwarded-For is walked from the right, at most `depth` entries, while the
// address reached is still a trusted proxy (nginx realip with
// real_ip_recursive, bounded by Traefik's ipStrategy depth). Entries further
// left were written by whoever sent the request to the first trusted proxy,
// so a client cannot spoof its way out of a limit: a forged entry is only
// reached through `depth` trusted hops.
import { type Checker, type Table, join } from '../config/check.js'
import type { Ctx } from '../worker/request/context.js'
import { type Cidr, allowList, canonicalIp, parseCidr, parseIp } from './ip.js'

export interface SourceConf {
  /** peers whose X-Forwarded-For is believed: addresses or CIDRs. Default: none */
  readonly trustedProxies: readonly string[]
  /** trusted hops walked through X-Forwarded-For at most. Default: 1 */
  readonly depth: number
}

export const SOURCE_KEYS = ['trusted_proxies', 'depth'] as const

/** A list of addresses or CIDRs; each bad element is reported with its index. */
export function checkCidrs (c: Checker, t: Table, key: string, path: string, def: readonly string[]): string[] {
  const list = c.strings(t, key, path, def)
  list.forEach((s, i) => {
    if (parseCidr(s) === null) c.problem(join(join(path, key), i), 'an IPv4 or IPv6 address or CIDR like "10.0.0.0/8" or "2001:db8::/32"', s)
  })
  return list
}

/** Compiles a checked list into the one address matcher (core/net/ip.ts allowList) used by every allow list. */
export function compileCidrs (list: readonly string[]): (ip: string) => boolean {
  return allowList(list.map(parseCidr).filter((x): x is Cidr => x !== null))
}

export function checkSource (c: Checker, t: Table, path: string): SourceConf {
  return {
    trustedProxies: checkCidrs(c, t, 'trusted_proxies', path, []),
    depth: c.int(t, 'depth', path, 1, 1, 32),
  }
}

export type SourceOf = (ctx: Ctx) => string

const peer: SourceOf = (ctx) => ctx.remoteAddress

/** Compiles a source strategy; without trusted proxies it is the peer address, with no work per request. */
export function compileSource (conf: SourceConf): SourceOf {
  if (conf.trustedProxies.length === 0) return peer
  const trusted = compileCidrs(conf.trustedProxies)
  const depth = conf.depth
  return (ctx) => {
    let addr = ctx.remoteAddress
    if (!trusted(addr)) return addr
    const xff = lastHeader(ctx, 'x-forwarded-for')
    let end = xff.length
    for (let hops = 0; hops < depth && end > 0;) {
      const comma = xff.lastIndexOf(',', end - 1)
      const entry = xff.slice(comma + 1, end).trim()
      end = comma < 0 ? 0 : comma
      if (entry === '') continue
      hops++
      if (parseIp(entry) === null) return addr // garbage from a trusted hop: the last good address stands
      addr = canonicalIp(entry)
      if (!trusted(addr)) return addr
    }
    return addr
  }
}

/** The last header of that name: its entries are the rightmost (appended by the nearest proxy). */
function lastHeader (ctx: Ctx, name: string): string {
  const h = ctx.headers
  for (let i = h.length - 2; i >= 0; i -= 2) if (h[i] === name) return h[i + 1]!
  return ''
}
