// Services of services, as Traefik's: `weighted` spreads requests over other
// services by weight (a canary: 95 to v1, 5 to v2), `failover` sends them to
// `service` while it has a server up and to `fallback` otherwise, `mirroring`
// sends them to `service` and a copy of `percent` of them to each mirror
// (responses discarded). They hold no servers; each request is handed to one
// of the services they name (which may be groups themselves, never in a cycle)
// and proxied as that service's.
import { type Checker, type Table, join } from './check.js'

export type ServiceGroup =
  | { readonly kind: 'weighted', readonly services: ReadonlyArray<{ readonly name: string, readonly weight: number }> }
  | { readonly kind: 'failover', readonly service: string, readonly fallback: string }
  | {
    readonly kind: 'mirroring'
    readonly service: string
    readonly mirrors: ReadonlyArray<{ readonly name: string, readonly percent: number }>
    /** a request whose body is larger is not mirrored (bytes); the copies are held in memory until the body ends */
    readonly maxBodyBytes: number
  }

/** The keys of each group kind (the others are refused naming the kind). */
export const GROUP_KEYS = ['services', 'service', 'fallback', 'mirrors', 'max_body_size'] as const
export const groupKeys: Readonly<Record<string, readonly string[]>> = {
  weighted: ['services'],
  failover: ['service', 'fallback'],
  mirroring: ['service', 'mirrors', 'max_body_size'],
}

/** The group of a `weighted` or `failover` service table (its other keys were checked by the caller). */
export function checkGroup (c: Checker, t: Table, p: string, kind: 'weighted' | 'failover' | 'mirroring'): ServiceGroup {
  if (kind === 'mirroring') {
    const mp = join(p, 'mirrors')
    const list = c.tables(t.mirrors, mp)
    if (list.length === 0) c.problems.push(`${mp}: expected at least one [[${mp}]] with a name and a percent`)
    const mirrors = list.map((m, i) => {
      const ip = join(mp, i)
      c.table(m, ip, ['name', 'percent'])
      return { name: c.string(m, 'name', ip), percent: c.number(m, 'percent', ip, 100, 0, 100) }
    })
    return { kind, service: c.string(t, 'service', p), mirrors, maxBodyBytes: c.size(t, 'max_body_size', p, 64 * 1024) }
  }
  if (kind === 'failover') {
    const service = c.string(t, 'service', p)
    const fallback = c.string(t, 'fallback', p)
    if (service !== '' && service === fallback) c.problems.push(`${join(p, 'fallback')}: the same service as ${join(p, 'service')}`)
    return { kind, service, fallback }
  }
  const sp = join(p, 'services')
  const list = c.tables(t.services, sp)
  if (list.length === 0) c.problems.push(`${sp}: expected at least one [[${sp}]] with a name and a weight`)
  const services = list.map((s, i) => {
    const ip = join(sp, i)
    c.table(s, ip, ['name', 'weight'])
    return { name: c.string(s, 'name', ip), weight: c.int(s, 'weight', ip, 1, 0, 1_000_000) }
  })
  if (list.length > 0 && services.every((s) => s.weight === 0)) c.problems.push(`${sp}: at least one weight above 0`)
  return { kind, services }
}

const names = (g: ServiceGroup): string[] => g.kind === 'weighted' ? g.services.map((s) => s.name) : g.kind === 'failover' ? [g.service, g.fallback] : [g.service, ...g.mirrors.map((m) => m.name)]

/** Every service a group names exists, has servers or is a group, and no group reaches itself. */
export function checkGroupRefs (c: Checker, services: ReadonlyArray<{ readonly name: string, readonly kind: string, readonly group: ServiceGroup | null }>): void {
  const byName = new Map(services.map((s) => [s.name, s]))
  for (const s of services) {
    if (s.group === null) continue
    for (const n of names(s.group)) {
      const t = byName.get(n)
      if (n === '') continue // reported as missing by checkGroup
      if (t === undefined) c.problems.push(`${join('services', s.name)}: unknown service ${JSON.stringify(n)}`)
      else if (t.kind !== 'proxy' && t.group === null) c.problems.push(`${join('services', s.name)}: service ${JSON.stringify(n)} is of kind "${t.kind}"; a ${s.group.kind} service names services with servers or other groups`)
      else if (s.group.kind === 'mirroring' && n !== s.group.service && t.kind !== 'proxy') c.problems.push(`${join('services', s.name)}: mirror ${JSON.stringify(n)} is of kind "${t.kind}"; a mirror is a service with servers`)
    }
    // a cycle through this group: depth-first over the groups it reaches
    const path = [s.name]
    const visit = (g: ServiceGroup): boolean => {
      for (const n of names(g)) {
        if (n === s.name) { path.push(n); return true }
        const t = byName.get(n)
        if (t?.group == null || path.includes(n)) continue
        path.push(n)
        if (visit(t.group)) return true
        path.pop()
      }
      return false
    }
    if (visit(s.group)) c.problems.push(`${join('services', s.name)}: a service group cannot contain itself (${path.join(' → ')})`)
  }
}
