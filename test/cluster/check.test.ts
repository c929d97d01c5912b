// [cluster] checked by `lb check` (the real CLI): every bad value is refused
// with a message naming the key, what was expected and what was found; a
// config without [cluster] never loads the Redis client.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { CLI, ROOT, request, simpleConfig, startBackend, startLb, tempDir } from '../helpers.js'

function check (cluster: string, files: Record<string, string> = {}): { status: number | null, out: string } {
  const dir = tempDir('lb-cluster-check-')
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
  const file = join(dir, 'lb.toml')
  writeFileSync(file, simpleConfig(['127.0.0.1:9']).replaceAll('{{PORT}}', '18080') + `\n[cluster]\n${cluster}\n`)
  const r = spawnSync(process.execPath, [CLI, 'check', '-c', file], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 })
  return { status: r.status, out: r.stdout + r.stderr }
}

function refused (cluster: string, re: RegExp, files?: Record<string, string>): void {
  const r = check(cluster, files)
  assert.equal(r.status, 1, r.out)
  assert.match(r.out, re)
}

test('lb check accepts good [cluster] sections', () => {
  for (const ok of [
    'url = "redis://127.0.0.1:6379"',
    'url = "redis://localhost:6379/2"\nnode = "lb-1"\nprefix = "prod:"\nsync_interval = "250ms"\nmax_wait = "20ms"\nnode_ttl = "5s"',
    'url = "rediss://redis.example.net:6380"\nusername = "lb"\npassword_file = "redis.pass"',
    'url = "redis://10.0.0.5:6379"\ninsecure = true',
    'url = "unix:/run/redis/redis.sock"',
  ]) {
    const r = check(ok, { 'redis.pass': 'secret\n' })
    assert.equal(r.status, 0, `${ok}: ${r.out}`)
  }
})

test('lb check refuses bad [cluster] values with a message naming each', () => {
  refused('', /cluster\.url: expected a string \(required\), found nothing/)
  refused('url = "http://127.0.0.1:6379"', /cluster\.url: expected a Redis URL: "redis:\/\/host:port", "rediss:\/\/host:port" \(TLS\) or "unix:\/path\/to\/redis\.sock", found "http:\/\/127\.0\.0\.1:6379"/)
  refused('url = "unix:redis.sock"', /cluster\.url: expected .*\(an absolute socket path\), found "unix:redis\.sock"/)
  refused('url = "redis://10.0.0.5:6379"', /cluster\.url: 10\.0\.0\.5 is not a loopback address and redis:\/\/ is plain text; use rediss:\/\/ \(TLS\), or set cluster\.insecure = true on a trusted network/)
  refused('url = "redis://127.0.0.1:6379/x"', /cluster\.url: expected .*\(a database number as path, like \/0\)/)
  refused('url = "redis://127.0.0.1:6379"\nsync_interval = "1ms"', /cluster\.sync_interval: expected a duration/)
  refused('url = "redis://127.0.0.1:6379"\nsync_interval = "1m"', /cluster\.sync_interval: expected a duration of at most "10s"/)
  refused('url = "redis://127.0.0.1:6379"\nmax_wait = "1h"', /cluster\.max_wait: expected a duration of at most "5s"/)
  refused('url = "redis://127.0.0.1:6379"\nsync_interval = "2s"\nnode_ttl = "3s"', /cluster\.node_ttl: expected a duration of at least twice sync_interval \(4000ms\), found "3s"/)
  refused('url = "redis://127.0.0.1:6379"\nnode = "a b"', /cluster\.node: expected a node name of 1 to 64 letters, digits, "\.", "_" or "-", found "a b"/)
  refused('url = "redis://127.0.0.1:6379"\nprefix = ""', /cluster\.prefix: expected 1 to 64 printable characters without blanks/)
  refused('url = "redis://127.0.0.1:6379"\ninsecure = "yes"', /cluster\.insecure: expected true or false, found "yes"/)
  refused('url = "redis://127.0.0.1:6379"\nport = 6379', /cluster\.port: unknown key \(allowed: url, username, password, password_file/)
  refused('url = "redis://127.0.0.1:6379"\npassword_file = "missing.pass"', /cluster\.password_file: expected a readable file holding the Redis password, found ".*missing\.pass"/)
  refused('url = "redis://127.0.0.1:6379"\npassword = "x"\npassword_file = "p"', /cluster\.password: set password or password_file, not both/, { p: 'x' })
  refused('url = "rediss://127.0.0.1:6379"\nca_file = "nope.pem"', /cluster\.ca_file: expected a readable PEM file of CA certificates/)
})

test('lb check: Redis Sentinel, fall and rise, and a rate limit\'s failure_mode', () => {
  for (const good of [
    'sentinels = ["redis://127.0.0.1:26379", "redis://[::1]:26380"]\nmaster_name = "lbm"\nsentinel_password_file = "redis.pass"\nfall = 5\nrise = 1',
    'sentinels = ["rediss://sentinel.example.net"]\nmaster_name = "m"\nusername = "lb"\nsentinel_username = "watch"',
    'url = "redis://127.0.0.1:6379"\n[middlewares.x]\ntype = "rateLimit"\nalgorithm = "slidingWindow"\nlimit = 1\nscope = "cluster"\nfailure_mode = "closed"',
  ]) {
    const r = check(good, { 'redis.pass': 'secret\n' })
    assert.equal(r.status, 0, `${good}: ${r.out}`)
  }
  const s = 'sentinels = ["redis://127.0.0.1:26379"]'
  refused(`url = "redis://127.0.0.1:6379"\n${s}\nmaster_name = "m"`, /cluster\.url: set url \(one Redis\) or sentinels \(Redis Sentinel\), not both/)
  refused('sentinels = []\nmaster_name = "m"', /cluster\.sentinels: expected a non-empty array of Sentinel addresses like "redis:\/\/host:26379" or "rediss:\/\/host:26379" \(TLS\), found an array of 0/)
  refused(s, /cluster\.master_name: expected a string \(required\), found nothing/)
  refused(`${s}\nmaster_name = "a b"`, /cluster\.master_name: expected the master's name in the sentinels' configuration/)
  refused('sentinels = ["http://127.0.0.1:1"]\nmaster_name = "m"', /cluster\.sentinels\[0\]: expected a Sentinel address: "redis:\/\/host:port" or "rediss:\/\/host:port" \(TLS\) \(no database, no path\), found "http:\/\/127\.0\.0\.1:1"/)
  refused('sentinels = ["redis://10.0.0.1:26379"]\nmaster_name = "m"', /cluster\.sentinels\[0\]: 10\.0\.0\.1 is not a loopback address and redis:\/\/ is plain text/)
  refused('sentinels = ["redis://127.0.0.1:1", "rediss://127.0.0.1:2"]\nmaster_name = "m"', /cluster\.sentinels: every sentinel with one scheme/)
  refused('sentinels = ["redis://u:pw@127.0.0.1:1"]\nmaster_name = "m"', /cluster\.sentinels\[0\]: a password inside the URL is refused/)
  refused(`${s}\nmaster_name = "m"\nsentinel_password = "x"\nsentinel_password_file = "p"`, /cluster\.sentinel_password: set sentinel_password or sentinel_password_file, not both/, { p: 'x' })
  refused('url = "redis://127.0.0.1:6379"\nmaster_name = "m"', /cluster\.master_name: only with sentinels/)
  refused('url = "redis://127.0.0.1:6379"\nfall = 0', /cluster\.fall: expected an integer from 1 to 100, found number 0/)
  refused('url = "redis://127.0.0.1:6379"\nrise = "2"', /cluster\.rise: expected an integer from 1 to 100, found (string )?"2"/)
  const mw = 'url = "redis://127.0.0.1:6379"\n[middlewares.x]\ntype = "rateLimit"\nalgorithm = "slidingWindow"\nlimit = 1\n'
  refused(`${mw}failure_mode = "closed"`, /middlewares\.x\.failure_mode: only with scope = "cluster" \(a local limit never waits for Redis\)/)
  refused(`${mw}scope = "cluster"\nfailure_mode = "shut"`, /middlewares\.x\.failure_mode: expected one of "open", "closed", found "shut"/)
})

test('a password inside the URL is refused and never echoed', () => {
  const r = check('url = "redis://lb:hunter2secret@127.0.0.1:6379"')
  assert.equal(r.status, 1)
  assert.match(r.out, /cluster\.url: a password inside the URL is refused \(it would show in logs\); use password_file or password/)
  assert.doesNotMatch(r.out, /hunter2secret/)
})

test('scope = "cluster" is accepted for every algorithm', () => {
  const dir = tempDir('lb-cluster-check-')
  const file = join(dir, 'lb.toml')
  for (const algorithm of ['average = 5', 'algorithm = "leakyBucket"\nrate = "5r/s"\nnodelay = true', 'algorithm = "slidingWindow"\nlimit = 5']) {
    writeFileSync(file, simpleConfig(['127.0.0.1:9'], '', `[middlewares.rl]\ntype = "rateLimit"\n${algorithm}\nscope = "cluster"\n`).replaceAll('{{PORT}}', '18080'))
    const r = spawnSync(process.execPath, [CLI, 'check', '-c', file], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 })
    assert.equal(r.status, 0, `${algorithm}: ${r.stdout}${r.stderr}`)
  }
})

test('without [cluster] the Redis client is never loaded', async () => {
  const backend = await startBackend('web')
  const dir = tempDir('lb-cluster-noload-')
  const marker = join(dir, 'loaded')
  const hook = join(dir, 'hook.cjs')
  // a preload that records every module file the process loads through require (ioredis is CommonJS)
  writeFileSync(hook, `const M = require('module'); const fs = require('fs'); const load = M._load
M._load = function (req, parent, main) { const r = load.apply(this, arguments); try { fs.appendFileSync(${JSON.stringify(marker)}, M._resolveFilename(req, parent, main) + '\\n') } catch {} return r }\n`)
  const lb = await startLb(simpleConfig([backend.address]), { nodeArgs: ['--require', hook] })
  try {
    assert.equal((await request(`${lb.url}/`)).status, 200)
    const loaded = readFileSync(marker, 'utf8')
    assert.match(loaded, /node_modules\/toml\//, 'the hook sees the modules lb loads')
    assert.doesNotMatch(loaded, /ioredis/)
  } finally {
    await lb.stop()
    await backend.close()
  }
})
