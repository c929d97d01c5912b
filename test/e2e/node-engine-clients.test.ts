// engine = "node" with the clients uWS turns away (505 "does not support
// HTTP/1.0"): curl -0 with and without keep-alive, ApacheBench (HTTP/1.0,
// with and without -k), nginx in front of lb with its default
// proxy_http_version 1.0, and the same on an https entry point
// (node:https with lb's TLS settings: TLS 1.2 minimum, SNI certificates,
// mTLS). Each third-party program is Debian's, installed by test/tools.sh;
// a test is skipped with the reason when it cannot be had.
import { strict as assert } from 'node:assert'
import { execFile } from 'node:child_process'
import { rmSync } from 'node:fs'
import tls from 'node:tls'
import { promisify } from 'node:util'
import { test } from 'node:test'
import { type Backend, type Lb, startBackend, startLb } from '../helpers.js'
import { startNginx } from '../fuzz/lib/nginx.js'
import { requireTool } from '../admin/util.js'
import { makeCerts } from '../tls/certs.js'

const run = promisify(execFile)

function config (web: Backend, entry = 'address = "127.0.0.1:{{PORT}}"'): string {
  return `[global]
workers = 2
access_log = "off"
[entrypoints.web]
engine = "node"
${entry}
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[[services.web.servers]]
address = "${web.address}"
check = false
`
}

async function start (t: { after: (fn: () => Promise<void>) => void }, entry?: string): Promise<{ lb: Lb, web: Backend }> {
  const web = await startBackend('web', (req, res) => { req.resume(); req.on('end', () => res.end(`web ${req.method!} ${req.url!} ${req.headers.host ?? ''}\n`)) })
  t.after(() => web.close())
  const lb = await startLb(config(web, entry))
  t.after(async () => { await lb.stop(); rmSync(lb.dir, { recursive: true, force: true }) })
  return { lb, web }
}

test('node engine: curl -0 (HTTP/1.0) is served, closed after each answer, and kept alive when it asks', async (t) => {
  if (requireTool(t, 'curl', 'curl') === null) return
  const { lb } = await start(t)
  const one = await run('curl', ['-s0', '-v', `${lb.url}/a`])
  assert.equal(one.stdout, `web GET /a 127.0.0.1:${lb.port}\n`)
  assert.match(one.stderr, /> GET \/a HTTP\/1\.0/)
  assert.match(one.stderr, /Connection: close|Closing connection/i)
  const two = await run('curl', ['-s0', '-v', '-H', 'Connection: keep-alive', `${lb.url}/b`, `${lb.url}/c`])
  assert.equal(two.stdout, `web GET /b 127.0.0.1:${lb.port}\nweb GET /c 127.0.0.1:${lb.port}\n`)
  assert.match(two.stderr, /Re-using existing connection/, 'the second request on the first connection')
})

test('node engine: ab (HTTP/1.0) completes every request, with and without keep-alive', async (t) => {
  if (requireTool(t, 'ab', 'apache2-utils') === null) return
  const { lb, web } = await start(t)
  for (const args of [[], ['-k']]) {
    const { stdout } = await run('ab', [...args, '-n', '200', '-c', '4', `${lb.url}/ab`])
    assert.match(stdout, /Complete requests:\s+200\n/, stdout)
    assert.match(stdout, /Failed requests:\s+0\n/, stdout)
    assert.match(stdout, /Non-2xx responses|Document Length:\s+\d+ bytes/, stdout)
    assert.doesNotMatch(stdout, /Non-2xx responses/, stdout)
    if (args.length > 0) assert.match(stdout, /Keep-Alive requests:\s+200\n/, stdout)
  }
  assert.equal(web.requests.length, 400)
})

test('node engine: nginx in front of lb with its default proxy_http_version 1.0 gets the answers', async (t) => {
  if (requireTool(t, 'nginx', 'nginx') === null || requireTool(t, 'curl', 'curl') === null) return
  const { lb, web } = await start(t)
  const nginx = await startNginx(lb.port, true) // proxy_pass alone: HTTP/1.0 to lb
  t.after(() => nginx.stop())
  for (const path of ['/x', '/y?z=1']) {
    const { stdout } = await run('curl', ['-s', '-w', ' %{http_code}', `http://127.0.0.1:${nginx.port}${path}`])
    assert.equal(stdout, `web GET ${path} 127.0.0.1:${lb.port}\n 200`)
  }
  const post = await run('curl', ['-s', '-w', ' %{http_code}', '--data-binary', 'hello', `http://127.0.0.1:${nginx.port}/post`])
  assert.equal(post.stdout, `web POST /post 127.0.0.1:${lb.port}\n 200`)
  assert.equal(web.requests.length, 3)
})

test('node engine on https: HTTP/1.0 and 1.1 over node:https with SNI certificates, TLS 1.2 minimum and client certificates', async (t) => {
  if (requireTool(t, 'openssl', 'openssl') === null || requireTool(t, 'curl', 'curl') === null) return
  const certs = makeCerts()
  t.after(() => rmSync(certs.dir, { recursive: true, force: true }))
  const entry = `address = "127.0.0.1:{{PORT}}"
protocol = "https"
[entrypoints.web.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
ca = "${certs.ca}"
[[entrypoints.web.tls.sni]]
cert = "${certs.other.cert}"
key = "${certs.other.key}"`
  const { lb } = await start(t, entry)
  const client = ['--cert', certs.client.cert, '--key', certs.client.key, '--cacert', certs.ca]
  const one = await run('curl', ['-s0', ...client, `https://127.0.0.1:${lb.port}/a`])
  assert.equal(one.stdout, `web GET /a 127.0.0.1:${lb.port}\n`)
  const sni = await run('curl', ['-s', ...client, '--resolve', `other.test:${lb.port}:127.0.0.1`, `https://other.test:${lb.port}/b`])
  assert.equal(sni.stdout, `web GET /b other.test:${lb.port}\n`, 'the SNI certificate verifies for other.test')
  // no client certificate: the handshake fails (mTLS), as on a uWS entry point with tls.ca
  await assert.rejects(run('curl', ['-s', '--cacert', certs.ca, `https://127.0.0.1:${lb.port}/c`]))
  // TLS 1.1 is refused
  const old = await new Promise<string>((resolve) => {
    const s = tls.connect({ port: lb.port, host: '127.0.0.1', maxVersion: 'TLSv1.1', minVersion: 'TLSv1', rejectUnauthorized: false, cert: undefined })
    s.on('secureConnect', () => { s.destroy(); resolve('connected') })
    s.on('error', (err) => resolve(err.message))
  })
  assert.notEqual(old, 'connected')
})
