// Config validation: every problem names the file, the key path, what was
// expected and what was found; `lb check` exits 0 or 1 like `nginx -t`.
import { strict as assert } from 'node:assert'
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { parseConfig } from '../../core/configure.js'
import { parseRule } from '../../core/config/rules/rule.js'
import { CLI, ROOT, tempDir } from '../helpers.js'

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

function problems (text: string): string {
  try {
    parseConfig(text, '/etc/lb/test.toml')
  } catch (err) {
    return (err as Error).message
  }
  assert.fail('expected the config to be rejected')
}

test('the shipped conf/lb.toml is valid and `lb check` says so', async () => {
  const r = await run(process.execPath, [CLI, 'check', '-c', join(ROOT, 'conf', 'lb.toml')])
  assert.match(r.stdout, /configuration file .*lb\.toml test is successful/)
})

test('defaults fill what the file leaves out', () => {
  const c = parseConfig(BASE)
  assert.equal(c.timeouts.connectMs, 5000)
  assert.equal(c.timeouts.serverMs, 50_000)
  assert.equal(c.timeouts.clientMs, 50_000)
  assert.equal(c.timeouts.keepAliveMs, 65_000)
  assert.equal(c.timeouts.headerMs, 30_000)
  assert.equal(c.timeouts.clientKeepAliveMs, 65_000) // the seed's keep-alive time-out
  assert.equal(c.limits.maxBodyBytes, 100 * 1024 * 1024)
  assert.equal(c.global.maxConnections, 100_000)
  const s = c.services[0]!
  assert.equal(s.balance, 'roundrobin')
  assert.equal(s.keepalive, 32)
  assert.deepEqual([s.servers[0]!.weight, s.servers[0]!.maxFails, s.servers[0]!.failTimeoutMs], [1, 3, 30_000])
  assert.ok(Object.isFrozen(c) && Object.isFrozen(c.services[0]!.servers[0]))
})

test('each problem names file, key path, expectation and what was found; all are reported at once', () => {
  const msg = problems(BASE + `
[timeouts]
connect = 5
[services.web.health_check]
intervall = "1s"
[services.api]
balance = "random"
[[services.api.servers]]
address = "localhost"
weight = 300
`)
  assert.match(msg, /\/etc\/lb\/test\.toml: timeouts\.connect: expected a duration like "5s" or "250ms" of at least 1ms, found number 5/)
  assert.match(msg, /\/etc\/lb\/test\.toml: services\.web\.health_check\.intervall: unknown key \(allowed: type, path, grpc_service, interval, timeout, rise, fall, status\)/)
  assert.match(msg, /services\.api\.balance: expected one of "roundrobin", "leastconn", "source", found "random"/)
  assert.match(msg, /services\.api\.servers\[0\]\.address: expected an address like "127\.0\.0\.1:9001" or "unix:\/path", found "localhost"/)
  assert.match(msg, /services\.api\.servers\[0\]\.weight: expected an integer from 0 to 256, found number 300/)
})

test('health_check type "grpc" takes a grpc_service; grpc_service with another type is a mistake', () => {
  const c = parseConfig(BASE + `
[services.web.health_check]
type = "grpc"
grpc_service = "pkg.Greeter"
`)
  assert.deepEqual([c.services[0]!.healthCheck.type, c.services[0]!.healthCheck.grpcService], ['grpc', 'pkg.Greeter'])
  assert.equal(parseConfig(BASE).services[0]!.healthCheck.grpcService, '')
  const msg = problems(BASE + `
[services.web.health_check]
grpc_service = "pkg.Greeter"
`)
  assert.match(msg, /services\.web\.health_check\.grpc_service: only for type = "grpc"/)
})

test('services protocol "h2" takes a tls table (ca_file read at load, server_name a host name); tls with another protocol is a mistake', () => {
  const c = parseConfig(BASE.replace('[services.web]\n', '[services.web]\nprotocol = "h2"\n'))
  assert.deepEqual(c.services[0]!.tls, { caFile: '', ca: '', serverName: '', insecureSkipVerify: false })
  const msg = problems(BASE.replace('[services.web]\n', '[services.web]\nprotocol = "h2c"\n') + `
[services.web.tls]
ca_file = "/nonexistent/ca.pem"
server_name = "10.0.0.1"
`)
  assert.match(msg, /services\.web\.tls: only for protocol = "h2"/)
  assert.match(msg, /services\.web\.tls\.ca_file: expected a readable PEM file of CA certificates, found "\/nonexistent\/ca\.pem"/)
  assert.match(msg, /services\.web\.tls\.server_name: expected a host name \(SNI takes no IP address\), found "10\.0\.0\.1"/)
})

test('references between sections are checked', () => {
  const msg = problems(`
[entrypoints.web]
address = "127.0.0.1:8080"
[routers.r]
rule = "PathPrefix(\`/\`) && Hots(\`x\`)"
entrypoints = ["websecure"]
service = "nope"
middlewares = ["auth"]
`)
  assert.match(msg, /routers\.r\.rule: column 20 of rule "PathPrefix\(`\/`\) && Hots\(`x`\)": unknown matcher Hots: expected one of Host, HostRegexp, Path, PathPrefix/)
  assert.match(msg, /routers\.r\.entrypoints: unknown entry point "websecure" \(defined: web\)/)
  assert.match(msg, /routers\.r\.service: unknown service "nope"/)
  assert.match(msg, /routers\.r\.middlewares: unknown middleware "auth"/)
})

test('unknown top-level sections and TOML syntax errors are rejected with the file and position', () => {
  assert.match(problems(BASE + '\n[frontend]\nx = 1\n'), /: frontend: unknown key \(allowed: /)
  assert.match(problems('[entrypoints.web\naddress = 1'), /\/etc\/lb\/test\.toml: TOML syntax error: .*line 1/)
})

test('`lb check` exits 1 on an invalid file and prints every problem', async () => {
  const dir = tempDir('lb-check-')
  const file = join(dir, 'bad.toml')
  writeFileSync(file, BASE.replace('127.0.0.1:9001', '127.0.0.1:99999'))
  await assert.rejects(run(process.execPath, [CLI, 'check', '-c', file]), (err: { code: number, stderr: string }) => {
    assert.equal(err.code, 1)
    assert.ok(err.stderr.includes(`${file}: services.web.servers[0].address: expected an address like "127.0.0.1:9001" or "unix:/path", found "127.0.0.1:99999"`), err.stderr)
    assert.match(err.stderr, /test failed/)
    return true
  })
  await assert.rejects(run(process.execPath, [CLI, 'check', '-c', join(dir, 'missing.toml')]), /cannot read .*missing\.toml/)
})

test('rules: precedence of && over ||, parentheses, several values', () => {
  const r = parseRule('Host(`a.example`, `B.example`) && PathPrefix(`/api/`) || Path(`/x`)')
  assert.equal(r.op, 'or')
  assert.deepEqual(parseRule('Host(`B.example`)'), { op: 'host', values: ['b.example'] })
  assert.equal(parseRule('(Path(`/a`) || Path(`/b`)) && Host(`h`)').op, 'and')
  assert.throws(() => parseRule('PathPrefix(`api`)'), /must start with "\/"/)
  assert.throws(() => parseRule('Path(`/a`'), /expected "," or "\)" after a value of Path, found the end of the rule/)
})

test('an integer outside the 64-bit range and nesting deeper than 500 name their line and key', () => {
  assert.match(problems('[global]\nworkers = 2\n\n[limits]\nmax_body = 99999999999999999999\n'),
    /TOML syntax error: Integer literal is outside the 64-bit signed integer range.* \(line 5, column \d+, key limits\.max_body\)/)
  assert.match(problems(`[global]\nlog_level = "info"\n[middlewares.m]\ntype = "headers"\ndeep = ${'['.repeat(600)}${']'.repeat(600)}\n`),
    /TOML syntax error: Maximum nesting depth of 500 exceeded.* \(line 5, column \d+, key middlewares\.m\.deep\)/)
  assert.match(problems(`x = ${'{a = '.repeat(600)}1${'}'.repeat(600)}\n`), /Maximum nesting depth of 500 exceeded.* \(line 1, column \d+, key x\)/)
})

test('timeouts.header and client_keep_alive: whole seconds from 1 s to 960 s (uWS counts seconds and wraps past 960)', () => {
  const c = parseConfig(BASE + '\n[timeouts]\nheader = "1500ms"\nclient_keep_alive = "960s"\n')
  assert.equal(c.timeouts.headerMs, 2_000, 'rounded up to a whole second')
  assert.equal(c.timeouts.clientKeepAliveMs, 960_000)
  const msg = problems(BASE + '\n[timeouts]\nheader = "500ms"\nclient_keep_alive = "961s"\n')
  assert.match(msg, /timeouts\.header: expected a duration like "5s" or "250ms" from 1s to 960s, found "500ms"/)
  assert.match(msg, /timeouts\.client_keep_alive: expected a duration like "5s" or "250ms" from 1s to 960s, found "961s"/)
})

test('[entrypoints.NAME.http2]: https and h2c only, checked sizes, h2c cannot turn it off', () => {
  const ep = (proto: string, extra: string): string => BASE + `[entrypoints.x]\naddress = "127.0.0.1:0"\nprotocol = "${proto}"\n${extra}\n`
  assert.match(problems(ep('http', 'http2 = true')), /entrypoints\.x\.http2: only for protocol = "https" or "h2c" \(this entry point is "http"\)/)
  assert.match(problems(ep('h2c', '[entrypoints.x.http2]\nenabled = false')), /entrypoints\.x\.http2\.enabled: expected true or nothing \(protocol = "h2c" is HTTP\/2 only\), found boolean false/)
  assert.match(problems(ep('h2c', '[entrypoints.x.http2]\nmax_concurrent_streams = 0')), /entrypoints\.x\.http2\.max_concurrent_streams: expected an integer from 1 to 10000, found number 0/)
  assert.match(problems(ep('h2c', '[entrypoints.x.http2]\ninitial_window_size = "4G"')), /entrypoints\.x\.http2\.initial_window_size: expected a size from 1024 to 2147483647 bytes, found "4G"/)
  assert.match(problems(ep('h2c', '[entrypoints.x.http2]\nmaxConcurrentStreams = 9')), /entrypoints\.x\.http2\.maxConcurrentStreams/)
  const conf = parseConfig(ep('h2c', ''), '/etc/lb/test.toml')
  assert.deepEqual(conf.entrypoints.find((e) => e.name === 'x')!.http2, {
    enabled: true, maxConcurrentStreams: 250, maxHeaderListSize: 65536, maxHeaderPairs: 128, initialWindowSize: 65535, idleTimeoutMs: 180_000,
  })
  assert.equal(parseConfig(BASE, '/etc/lb/test.toml').entrypoints[0]!.http2.enabled, false)
})

test('services.NAME.protocol: "http" (default), "h2c" or "h2"', () => {
  assert.match(problems(BASE.replace('[services.web]', '[services.web]\nprotocol = "https"')), /services\.web\.protocol: expected one of "http", "h2c", "h2", found "https"/)
  assert.equal(parseConfig(BASE, '/etc/lb/test.toml').services[0]!.protocol, 'http')
  assert.equal(parseConfig(BASE.replace('[services.web]', '[services.web]\nprotocol = "h2c"'), '/etc/lb/test.toml').services[0]!.protocol, 'h2c')
})
