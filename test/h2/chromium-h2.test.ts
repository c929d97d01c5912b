// A browser over HTTP/2 through lb: headless Chromium (Debian's) loads a page
// with 50 assets from an https entry point with http2 = true, in front of an
// HTTP/1.1 backend. Every one of them, the page included, came over h2 (the
// browser's own record: nextHopProtocol of the Resource Timing entries of the
// assets; the browser may add its own, such as the favicon), lb's
// access log says HTTP/2.0 for each, and the backend served all 51.
import { strict as assert } from 'node:assert'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { connect, startChromium, stopChromium } from '../chromium.js'
import { startBackend, startLb, waitFor } from '../helpers.js'
import { requireTool } from '../admin/util.js'
import { makeCerts } from '../tls/certs.js'

const ASSETS = 50

test('headless Chromium loads a page and its 50 assets over h2 through lb', { timeout: 90_000 }, async (t) => {
  const bin = requireTool(t, 'chromium', 'chromium')
  if (bin === null) return
  const page = `<!doctype html><html><head><title>h2</title></head><body>${Array.from({ length: ASSETS }, (_, i) => `<img src="/asset/${i}.svg" width="8" height="8">`).join('')}</body></html>`
  const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect width="8" height="8" fill="teal"/></svg>'
  const backend = await startBackend('web', (req, res) => {
    req.resume()
    if (req.url === '/') {
      res.setHeader('content-type', 'text/html; charset=utf-8')
      res.end(page)
    } else {
      res.setHeader('content-type', 'image/svg+xml')
      res.setHeader('cache-control', 'no-store')
      res.end(svg)
    }
  })
  t.after(() => backend.close())
  const certs = makeCerts()
  const lb = await startLb(`[global]
workers = 2
access_log = "{{DIR}}/access.log"
[entrypoints.web]
address = "127.0.0.1:0"
protocol = "https"
http2 = true
[entrypoints.web.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
[routers.all]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "${backend.address}"
check = false
`, { noWait: true })
  t.after(() => lb.stop())
  const port = await lb.portOf('web')
  // the test CA is not the browser's: accept its certificate, nothing else changes
  const chrome = await startChromium(bin, ['--ignore-certificate-errors'])
  t.after(() => stopChromium(chrome))
  const cdp = await connect(chrome.port, `https://127.0.0.1:${port}/`)
  t.after(() => cdp.close())
  interface Seen { done: boolean, page: string, assets: string[] }
  const seen = await waitFor(async () => {
    const r = await cdp.call('Runtime.evaluate', {
      returnByValue: true,
      expression: `JSON.stringify({
        done: document.readyState === 'complete',
        page: (performance.getEntriesByType('navigation')[0] || {}).nextHopProtocol || '',
        assets: performance.getEntriesByType('resource').filter((e) => e.name.includes('/asset/')).map((e) => e.nextHopProtocol),
      })`,
    })
    const value = (r.result as { value?: string } | undefined)?.value
    const s = value === undefined ? null : JSON.parse(value) as Seen
    return s !== null && s.done && s.assets.length >= ASSETS ? s : null
  }, 'the page and its assets loaded', 30_000, 100)
  assert.equal(seen.page, 'h2')
  assert.equal(seen.assets.length, ASSETS)
  assert.deepEqual([...new Set(seen.assets)], ['h2'])
  assert.equal(backend.requests.filter((r) => r.url.startsWith('/asset/')).length, ASSETS)
  const lines = await waitFor(() => {
    const l = readFileSync(join(lb.dir, 'access.log'), 'utf8').trim().split('\n').filter((x) => x.includes('/asset/'))
    return l.length >= ASSETS ? l : null
  }, 'the access log lines')
  assert.ok(lines.every((l) => l.includes('"protocol":"HTTP/2.0"')), 'every asset logged as HTTP/2.0')
})
