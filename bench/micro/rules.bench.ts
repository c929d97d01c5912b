// Routing over 1,000 routers: the cost per request of matchRoute, and whether
// it allocates (garbage collections counted over a million matches). Two rule
// sets: "3 matchers" uses only Host, PathPrefix and Path, the rules the router
// knew before the whole Traefik v3 language, so this file compiled into an
// older tree measures the old router on the same work; "all matchers" mixes
// every v3 matcher, negation and regexps (skipped where the tree cannot parse it).
// `node dist/bench/micro/rules.bench.js`
import { PerformanceObserver } from 'node:perf_hooks'
import { parseConfig } from '../../core/configure.js'
import type { Ctx } from '../../core/worker/request/context.js'
import { compileRoutes, matchRoute } from '../../core/worker/request/router.js'
import { browserCtx } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

const N = 1000

/** 1,000 routers of the old three matchers, plus a catch-all: host+prefix, prefix and exact-path rules. */
function threeMatchers (): string {
  let t = ''
  for (let i = 0; i < N; i++) {
    const rule = i % 10 < 5
      ? `Host(\`svc${i}.example.com\`) && PathPrefix(\`/api/v${i}/\`)`
      : i % 10 < 9 ? `PathPrefix(\`/app${i}/\`)` : `Path(\`/exact${i}\`) || Path(\`/other${i}\`)`
    t += `[routers.r${i}]\nrule = "${rule}"\nservice = "s"\n`
  }
  return t
}

/** 1,000 routers mixing every matcher: regexps on host, path, header and query, methods, client addresses, negations. */
function allMatchers (): string {
  const kinds = [
    (i: number) => `HostRegexp(\`^(www\\\\.)?shop${i}\\\\.example\\\\.(com|org)$\`)`,
    (i: number) => `PathRegexp(\`^/items${i}/[0-9]+(/[a-z-]+)?$\`)`,
    (i: number) => `Header(\`X-Tenant\`, \`t${i}\`) && PathPrefix(\`/t/\`)`,
    (i: number) => `HeaderRegexp(\`X-Version\`, \`^v${i}\\\\.[0-9]+$\`)`,
    (i: number) => `Query(\`tenant\`, \`q${i}\`)`,
    (i: number) => `QueryRegexp(\`lang\`, \`^(en|fr)-${i}$\`) && Method(\`GET\`)`,
    (i: number) => `ClientIP(\`10.${i >> 8}.${i & 255}.0/24\`) && !Method(\`DELETE\`)`,
    (i: number) => `(Host(\`a${i}.example.com\`) || Host(\`*.b${i}.example.com\`)) && !PathPrefix(\`/private/\`)`,
    (i: number) => `PathPrefix(\`/app${i}/\`) && !Header(\`X-Debug\`, \`1\`)`,
    (i: number) => `Method(\`PUT\`) && Path(\`/upload${i}\`)`,
  ]
  let t = ''
  for (let i = 0; i < N; i++) t += `[routers.r${i}]\nrule = "${kinds[i % kinds.length]!(i)}"\nservice = "s"\n`
  return t
}

function config (routers: string): string {
  return `[entrypoints.web]\naddress = "127.0.0.1:8080"\n${routers}[routers.catchall]\nrule = "PathPrefix(\`/\`)"\npriority = 1\nservice = "s"\n[services.s]\n[[services.s.servers]]\naddress = "127.0.0.1:9001"\n`
}

function ctxFor (path: string, query = '', host = 'www.example.com'): Ctx {
  const c = browserCtx('203.0.113.7', path)
  c.query = query
  c.host = host
  return c
}

/** Garbage collections while `fn` runs `n` times: none means it allocated nothing the young generation had to reclaim. */
async function gcsDuring (fn: () => void, n: number): Promise<number> {
  let gcs = 0
  const obs = new PerformanceObserver((list) => { gcs += list.getEntries().length })
  obs.observe({ entryTypes: ['gc'] })
  for (let i = 0; i < n; i++) fn()
  await new Promise((resolve) => setTimeout(resolve, 50))
  obs.disconnect()
  return gcs
}

export async function run (): Promise<Result[]> {
  const sets: Array<[string, string, Record<string, Ctx>]> = [
    ['3 matchers', threeMatchers(), {
      'no match: all 1,000 tried, then the catch-all': ctxFor('/nothing/here'),
      'host + prefix': ctxFor('/api/v500/users', '', 'svc500.example.com'),
      'exact path': ctxFor('/exact999'),
    }],
    ['all matchers', allMatchers(), {
      'no match: all 1,000 tried, then the catch-all': ctxFor('/nothing/here', 'a=1&b=2'),
      'path regexp': ctxFor('/items991/42/blue-shoes'),
      'query value (decoded in place)': ctxFor('/search', 'x=1&tenant=q%34', 'www.example.com'),
      'escaped path against prefixes and regexps': ctxFor('/app8/a%20b'),
    }],
  ]
  const out: Result[] = []
  for (const [name, routers, cases] of sets) {
    let conf
    const tLoad = performance.now()
    try {
      conf = parseConfig(config(routers))
      console.log(`rules (${name}): config with ${conf.routers.length} routers parsed and validated (regexps compiled) in ${(performance.now() - tLoad).toFixed(0)} ms`)
    } catch (err) {
      console.log(`rules (${name}): not supported by this tree: ${String(err).slice(0, 120)}`)
      continue
    }
    const t0 = performance.now()
    const routes = compileRoutes(conf.routers, 'web', (r) => r.name)
    console.log(`rules (${name}): ${conf.routers.length} routers compiled for the entry point in ${(performance.now() - t0).toFixed(1)} ms`)
    let sink = 0
    const fns: Record<string, () => void> = {}
    for (const [label, ctx] of Object.entries(cases)) fns[label] = () => { sink += matchRoute(routes, ctx)!.priority }
    out.push(...await runSuite(`rules, ${name}`, fns))
    for (const [label, fn] of Object.entries(fns)) console.log(`rules, ${name} › ${label}: ${await gcsDuring(fn, 100_000)} GCs in 100,000 matches`)
    if (sink === 0) console.log('unreachable')
  }
  return out
}

if (isMain(import.meta.url)) await run()
