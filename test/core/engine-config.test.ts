// [entrypoints.NAME] engine: "uws" (default) or "node" (core/config/static.ts),
// refused with the key path, what is expected and what was found, by lb check too.
import { strict as assert } from 'node:assert'
import { execFile } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { parseConfig } from '../../core/configure.js'
import { CLI, tempDir } from '../helpers.js'

const ep = (extra: string): string => `[entrypoints.web]\naddress = "127.0.0.1:8080"\n${extra}\n`

test('engine: "uws" by default, "node" when asked, per entry point', () => {
  assert.equal(parseConfig(ep('')).entrypoints[0]!.engine, 'uws')
  assert.equal(parseConfig(ep('engine = "node"')).entrypoints[0]!.engine, 'node')
  assert.equal(parseConfig(ep('engine = "uws"')).entrypoints[0]!.engine, 'uws')
})

test('engine: another value, another type, or on a tcp entry point is refused naming the key', async () => {
  assert.throws(() => parseConfig(ep('engine = "nginx"')), /entrypoints\.web\.engine: expected one of "uws", "node", found "nginx"/)
  assert.throws(() => parseConfig(ep('engine = 1')), /entrypoints\.web\.engine: expected a string, found number 1/)
  assert.throws(() => parseConfig(`[entrypoints.pg]\naddress = "127.0.0.1:5432"\nprotocol = "tcp"\nservice = "pg"\nengine = "node"
[services.pg]\n[[services.pg.servers]]\naddress = "127.0.0.1:5433"`), /entrypoints\.pg\.engine: only for protocol = "http" or "https"/)
  assert.throws(() => parseConfig('[entrypoints.g]\naddress = "127.0.0.1:5000"\nprotocol = "h2c"\nengine = "node"'), /entrypoints\.g\.engine: only for protocol = "http" or "https"/)
  // HTTP/2 is node:http2's, served next to uWS (core/worker/transport/h2/h2.ts); the node engine offers HTTP/1.1 only
  assert.throws(() => parseConfig(`[entrypoints.s]\naddress = "127.0.0.1:8443"\nprotocol = "https"\nengine = "node"
[entrypoints.s.tls]\ncert = "/etc/lb/c.pem"\nkey = "/etc/lb/k.pem"\n[entrypoints.s.http2]\nenabled = true`), /entrypoints\.s\.http2\.enabled: HTTP\/2 is served with engine = "uws" only/)
  const dir = tempDir()
  try {
    const file = join(dir, 'lb.toml')
    writeFileSync(file, ep('engine = "nginx"'))
    const r = await promisify(execFile)(process.execPath, [CLI, 'check', '-c', file]).then(() => null, (err: { code: number, stderr: string }) => err)
    assert.ok(r !== null, 'lb check exits 1')
    assert.equal(r.code, 1)
    assert.match(r.stderr, new RegExp(`${file.replaceAll('/', '\\/')}: .*entrypoints\\.web\\.engine: expected one of "uws", "node", found "nginx"`, 's'))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
