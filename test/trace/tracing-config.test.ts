// [tracing] validation: each bad key named with what was expected, the export
// headers' values never shown; Traefik v3's documented example, in lb's snake
// case, passes `lb check` and samples as documented (sampleRate 0.2: about a
// fifth of the traces Traefik starts).
import { strict as assert } from 'node:assert'
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { parseConfig } from '../../core/configure.js'
import { CLI, freePort, request, startBackend, startLb, tempDir, waitFor } from '../helpers.js'
import { attr, startCollector } from './collector.js'
import { config } from './util.js'

const run = promisify(execFile)

const BASE = `
[entrypoints.web]
address = "127.0.0.1:8080"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
address = "127.0.0.1:9001"
`

// Traefik v3 docs (observability/tracing: overview and opentelemetry), TOML tab: serviceName, sampleRate, otlp.http endpoint and headers
const TRAEFIK_EXAMPLE = `
[tracing]
  service_name = "traefik"
  sample_rate = 0.2
  [tracing.otlp.http]
    endpoint = "https://collector:4318/v1/traces"
    [tracing.otlp.http.headers]
      foo = "bar"
      baz = "buz"
`

function problems (text: string): string {
  try {
    parseConfig(text, '/etc/lb/test.toml')
  } catch (err) {
    return (err as Error).message
  }
  assert.fail('expected the config to be rejected')
}

test('tracing: bad keys are named with what was expected', () => {
  const p = problems(BASE + `
[tracing]
sample_rate = 1.5
max_queue_spans = 10
batch_size = 20
flush_interval = "soon"
captured_request_headers = ["X-Id"]
[tracing.otlp.grpc]
endpoint = "collector:4317"
[tracing.otlp.http]
endpoint = "ftp://collector/v1/traces"
[tracing.otlp.http.headers]
"bad header" = "v"
x-key = 42
x-nl = "a\\nb"
`)
  assert.match(p, /tracing\.sample_rate: expected a number from 0 to 1, found number 1\.5/)
  assert.match(p, /tracing\.batch_size: expected at most max_queue_spans \(10\), found number 20/)
  assert.match(p, /tracing\.flush_interval: expected a duration like "5s"/)
  assert.match(p, /tracing\.captured_request_headers: unknown key \(allowed: service_name, sample_rate, /)
  assert.match(p, /tracing\.otlp\.grpc: OTLP over gRPC is not supported by lb; use \[tracing\.otlp\.http\]/)
  assert.match(p, /tracing\.otlp\.http\.endpoint: expected an http:\/\/ or https:\/\/ URL, found "ftp:\/\/collector\/v1\/traces"/)
  assert.match(p, /tracing\.otlp\.http\.headers\."bad header": expected a header name/)
  assert.match(p, /tracing\.otlp\.http\.headers\.x-key: expected a string \(the value is not shown/)
  assert.match(p, /tracing\.otlp\.http\.headers\.x-nl: expected a header value without CR, LF or NUL/)
  assert.ok(!p.includes('42'), 'a header value is never shown')
  assert.match(problems(BASE + '[tracing.otlp.http]\nendpoint = "http://u:secret@collector:4318/v1/traces"\n'), /endpoint: expected a URL without user:password@/)
  assert.ok(!problems(BASE + '[tracing.otlp.http]\nendpoint = "http://u:secret@collector:4318/v1/traces"\n').includes('secret'))
  assert.match(problems(BASE + '[tracing.otlp.http]\nendpoint = "not a url"\n'), /tracing\.otlp\.http\.endpoint: expected a URL like "http:\/\/collector:4318\/v1\/traces", found "not a url"/)
})

test('tracing: absent is off; [tracing] alone is on with Traefik\'s defaults', () => {
  assert.equal(parseConfig(BASE, '/etc/lb/t.toml').tracing, null)
  const t = parseConfig(BASE + '[tracing]\n', '/etc/lb/t.toml').tracing
  assert.ok(t !== null)
  assert.equal(t.sampleRate, 1)
  assert.equal(t.endpoint, 'https://localhost:4318/v1/traces')
  assert.equal(t.serviceName, 'lb')
})

test('Traefik\'s documented [tracing] example passes `lb check`', async () => {
  const dir = tempDir('lb-trace-check-')
  const file = join(dir, 'lb.toml')
  writeFileSync(file, BASE + TRAEFIK_EXAMPLE)
  const r = await run(process.execPath, [CLI, 'check', '-c', file])
  assert.match(r.stdout + r.stderr, /test is successful/)
  const t = parseConfig(BASE + TRAEFIK_EXAMPLE, file).tracing!
  assert.equal(t.sampleRate, 0.2)
  assert.deepEqual(t.headers, { foo: 'bar', baz: 'buz' })
})

test('Traefik\'s example behaves as documented: about a fifth of new traces sampled, a sampled parent always followed', async (t) => {
  const backend = await startBackend('b1')
  const collector = await startCollector()
  t.after(async () => { await backend.close(); await collector.close() })
  // the example as documented, pointed at the test's collector, exporting every 50 ms rather than 5 s
  const tracing = TRAEFIK_EXAMPLE.replace('https://collector:4318/v1/traces', collector.endpoint).replace('sample_rate = 0.2', 'sample_rate = 0.2\n  flush_interval = "50ms"')
  const lb = await startLb(config(backend.address, await freePort(), tracing))
  t.after(() => lb.stop())
  const N = 300
  for (let i = 0; i < N; i++) await request(`${lb.url}/r${i}`)
  const sampled = backend.requests.filter((r) => String(r.headers.traceparent).endsWith('-01')).length
  await request(`${lb.url}/last`, { headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } })
  await waitFor(() => collector.spans.find((s) => attr(s, 'url.path') === '/last'), 'the last span', 10_000)
  const spans = collector.spans.filter((s) => attr(s, 'url.path') !== '/last').length
  // binomial(300, 0.2): mean 60, sd 6.9; these bounds are 5 sd away
  assert.ok(spans >= 25 && spans <= 95, `${spans} of ${N} sampled`)
  assert.equal(spans, sampled, 'a span for each traceparent sent upstream with flag 01, none for 00')
  assert.equal(collector.posts[0]!.headers.foo, 'bar')
})
