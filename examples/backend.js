// A tiny HTTP backend to try lb with (README "Set up"): answers the default
// health check (GET /health → 200 "ok") and everything else with its name and
// the request line, so balancing shows in the replies.
//   node examples/backend.js 9001 [name]      (name defaults to "backend :9001")
// Any server works as a backend if it answers 200 on the service's
// health_check.path; `python3 -m http.server` answers 404 there and stays DOWN.
import http from 'node:http'

const port = Number(process.argv[2] ?? 9001)
const name = process.argv[3] ?? `backend :${port}`
http.createServer((req, res) => {
  req.resume()
  res.setHeader('content-type', 'text/plain; charset=utf-8')
  res.end(req.url === '/health' ? 'ok\n' : `${name}: ${req.method} ${req.url}\n`)
}).listen(port, '127.0.0.1', () => console.log(`${name} listening on http://127.0.0.1:${port}`))
