// One POST to an HTTP(S) URL from any thread, for lb's own exports (the OTLP
// span exporter, core/worker/trace/exporter.ts): not a proxy path, so it uses
// node's client rather than the data plane's upstream pools. One kept-alive
// connection per thread and scheme: exports go one at a time.
import http from 'node:http'
import https from 'node:https'

const AGENTS = { http: new http.Agent({ keepAlive: true, maxSockets: 1 }), https: new https.Agent({ keepAlive: true, maxSockets: 1 }) }

/** What came back: an HTTP status (the body is read and discarded), or 0 and why nothing did. */
export interface PostResult {
  readonly status: number
  readonly error: string
}

/** POSTs `body`; never rejects. A request not answered within `timeoutMs` (no byte either way) is aborted. */
export function post (url: URL, headers: Readonly<Record<string, string>>, contentType: string, body: string, timeoutMs: number): Promise<PostResult> {
  return new Promise((resolve) => {
    const tls = url.protocol === 'https:'
    const req = (tls ? https : http).request(url, {
      method: 'POST',
      agent: tls ? AGENTS.https : AGENTS.http,
      timeout: timeoutMs,
      headers: { ...headers, 'content-type': contentType, 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode ?? 0, error: '' }))
      res.on('error', (err) => resolve({ status: 0, error: err.message }))
    })
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)))
    req.on('error', (err) => resolve({ status: 0, error: err.message }))
    req.end(body)
  })
}
