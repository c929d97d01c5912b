// [providers.file] (Traefik's file provider): routers, services and middlewares
// in a directory of TOML files beside lb.toml, merged at every load, and with
// watch = true applied when a file there changes, with no signal: a new file
// adds its routes, an atomic replace (write and rename, as configuration tools
// do) changes them, an invalid file keeps the running configuration and the log
// names the file and the key, a removed file takes its routes away. A name
// defined in two files is refused naming both. Real lb, real backends.
import { strict as assert } from 'node:assert'
import { renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type Backend, type Lb, request, startBackend, startLb, tempDir, waitFor } from '../helpers.js'
import { problems } from '../plugins/setup.js'

const route = (name: string, prefix: string, address: string): string => `[routers.${name}]
rule = "PathPrefix(\`${prefix}\`)"
service = "${name}"
[services.${name}]
[[services.${name}.servers]]
address = "${address}"
check = false
`

describe('providers.file: loading', () => {
  test('problems in a provider file name that file; a name defined twice names both; only dynamic sections there', () => {
    const dir = tempDir('lb-provider-')
    writeFileSync(join(dir, 'a.toml'), route('a', '/a', '127.0.0.1:1'))
    writeFileSync(join(dir, 'b.toml'), route('a', '/b', '127.0.0.1:2') + '[routers.bad]\nrule = "Nope(`x`)"\nservice = "a"\n')
    writeFileSync(join(dir, 'c.toml'), '[global]\nworkers = 1\n')
    writeFileSync(join(dir, 'notes.txt'), 'not toml: ignored')
    const main = `[entrypoints.web]\naddress = "127.0.0.1:0"\n[providers.file]\ndirectory = "${dir}"\n`
    const text = problems(main, join(dir, '..', 'lb.toml'))
    assert.match(text, new RegExp(`${join(dir, 'b.toml')}: routers\\.a: already defined in ${join(dir, 'a.toml')}`))
    assert.match(text, new RegExp(`${join(dir, 'b.toml')}: routers\\.bad\\.rule: `))
    assert.match(text, new RegExp(`${join(dir, 'c.toml')}: global: not allowed in a provider file`))
    assert.match(problems('[entrypoints.web]\naddress = "127.0.0.1:0"\n[providers.file]\nwatch = true\n'), /providers\.file: one of directory or filename/)
  })
})

describe('providers.file with watch = true through the balancer', () => {
  let a: Backend, b: Backend, lb: Lb, dir: string
  const body = async (path: string): Promise<string> => {
    const r = await request(lb.url + path)
    return `${r.status} ${r.body.trim()}`
  }

  before(async () => {
    ;[a, b] = await Promise.all([startBackend('A'), startBackend('B')])
    dir = tempDir('lb-provider-')
    writeFileSync(join(dir, 'a.toml'), route('a', '/a', a.address))
    lb = await startLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[providers.file]
directory = "${dir}"
`)
  })
  after(async () => {
    await lb?.stop()
    await Promise.all([a, b].map((x) => x?.close()))
    rmSync(dir, { recursive: true, force: true })
  })

  test('the routes of the files at start are served', async () => {
    assert.equal(await body('/a'), '200 A')
    assert.match(await body('/b'), /^404 /)
  })

  test('a new file is applied with no signal', async () => {
    writeFileSync(join(dir, 'b.toml'), route('b', '/b', b.address))
    await waitFor(async () => (await body('/b')) === '200 B', 'the new file\'s route', 10_000, 100)
    assert.equal(await body('/a'), '200 A')
  })

  test('an atomic replace (write, then rename over) changes a route', async () => {
    writeFileSync(join(dir, '.a.toml.tmp'), route('a', '/a', b.address))
    renameSync(join(dir, '.a.toml.tmp'), join(dir, 'a.toml'))
    await waitFor(async () => (await body('/a')) === '200 B', 'the replaced route', 10_000, 100)
  })

  test('an invalid file keeps the running configuration; the log names the file and the key', async () => {
    writeFileSync(join(dir, 'c.toml'), '[services.c]\nbalance = "fastest"\n')
    await waitFor(() => /reload rejected[^\n]*c\.toml: services\.c\.balance/.test(lb.log()), 'the rejection in the log', 10_000, 100)
    assert.equal(await body('/a'), '200 B')
    assert.equal(await body('/b'), '200 B')
    // fixed, it applies
    writeFileSync(join(dir, 'c.toml'), route('c', '/c', a.address))
    await waitFor(async () => (await body('/c')) === '200 A', 'the fixed file\'s route', 10_000, 100)
  })

  test('a removed file takes its routes away', async () => {
    rmSync(join(dir, 'b.toml'))
    await waitFor(async () => /^404 /.test(await body('/b')), 'the removed route gone', 10_000, 100)
    assert.equal(await body('/c'), '200 A')
  })
})
