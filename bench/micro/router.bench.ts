// Per-request cost of routing: matchRoute over the seed's routers (status,
// api, web) plus two host routers, for requests that end on each of them.
import { parseConfig } from '../../core/configure.js'
import { compileRoutes, matchRoute } from '../../core/worker/request/router.js'
import { browserCtx } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

export async function run (): Promise<Result[]> {
  const conf = parseConfig(`
[entrypoints.web]
address = "127.0.0.1:8080"
[routers.status]
rule = "Path(\`/status\`)"
service = "status"
[routers.api]
rule = "PathPrefix(\`/api/\`)"
service = "s"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "s"
[routers.admin]
rule = "Host(\`admin.example.com\`) && PathPrefix(\`/\`)"
service = "s"
[routers.shop]
rule = "Host(\`shop.example.com\`, \`store.example.com\`) && (PathPrefix(\`/cart\`) || PathPrefix(\`/checkout\`))"
service = "s"
[services.status]
kind = "status"
[services.s]
[[services.s.servers]]
address = "127.0.0.1:9001"
`)
  const routes = compileRoutes(conf.routers, 'web', (r) => r.name)
  const web = browserCtx('203.0.113.7', '/static/app.js')
  const api = browserCtx('203.0.113.7', '/api/generate')
  const shop = browserCtx('203.0.113.7', '/checkout/step2')
  shop.host = 'store.example.com'
  const status = browserCtx('203.0.113.7', '/status')
  let sink = 0
  const result = await runSuite('router match', {
    'web (last of 5 routes)': () => { sink += matchRoute(routes, web)!.priority },
    api: () => { sink += matchRoute(routes, api)!.priority },
    'shop (host || path rule)': () => { sink += matchRoute(routes, shop)!.priority },
    'status (exact path)': () => { sink += matchRoute(routes, status)!.priority },
  })
  if (sink === 0) console.log('unreachable')
  return result
}

if (isMain(import.meta.url)) await run()
