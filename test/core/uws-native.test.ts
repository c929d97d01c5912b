// lb's install step for uWebSockets.js (scripts/uws-native.mjs), run on a copy
// of lb's folder: it patches only where glibc lacks the C23 symbols, is
// idempotent, checks every sha256, and leaves the package's files alone. And
// `lb run` on a system where uWS cannot load: one line naming what works.
import { strict as assert } from 'node:assert'
import { execFileSync, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { test } from 'node:test'
import { ROOT } from '../helpers.js'

interface Native {
  install (o?: { glibc?: [number, number] | null, cc?: string }): string
  glibcVersion (): [number, number] | null
  manifest (): { version: string, binaries: Record<string, { sha256: string, weak?: string }> }
  binaryName (): string
  buildDir (): string
}

const sha256 = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex')
const UWS_DIR = join(ROOT, 'node_modules', 'uWebSockets.js')

/**
 * A copy of lb's folder in a temp dir: its install script, native/ and dist/;
 * node_modules links to lb's packages except uWebSockets.js, which is a copy
 * holding only the binaries `keep` names (the wrapper and types always).
 */
function copyLb (t: { after: (fn: () => void) => void }, keep: (file: string) => boolean): string {
  const dir = mkdtempSync(join(tmpdir(), 'lb-native-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  for (const p of ['package.json', 'scripts', 'native/uws.json', 'native/isoc23-shim.c', 'dist/core', 'dist/plugins']) cpSync(join(ROOT, p), join(dir, p), { recursive: true })
  mkdirSync(join(dir, 'node_modules', 'uWebSockets.js'), { recursive: true })
  for (const f of readdirSync(join(ROOT, 'node_modules'))) {
    if (f !== 'uWebSockets.js' && f !== '.bin') symlinkSync(join(ROOT, 'node_modules', f), join(dir, 'node_modules', f))
  }
  for (const f of readdirSync(UWS_DIR)) if (!f.endsWith('.node') || keep(f)) cpSync(join(UWS_DIR, f), join(dir, 'node_modules', 'uWebSockets.js', f))
  return dir
}

async function load (dir: string): Promise<Native> {
  return await import(pathToFileURL(join(dir, 'scripts', 'uws-native.mjs')).href) as Native
}

test('the install step patches only on glibc 2.36-2.37, idempotently, into lb\'s own folder, and checks every sha256', async (t) => {
  const name = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`
  const dir = copyLb(t, (f) => f === name)
  const native = await load(dir)
  const rec = native.manifest().binaries[name]!
  const orig = join(dir, 'node_modules', 'uWebSockets.js', name)
  assert.equal(sha256(orig), rec.sha256, 'the installed binary is the recorded one')
  const build = native.buildDir()
  assert.ok(build.startsWith(dir), 'the copy is made inside lb\'s folder')

  // glibc 2.38 and newer: the binary loads as it is, nothing is built
  assert.equal(native.install({ glibc: [2, 38] }), 'as-is')
  assert.equal(existsSync(build), false)
  // older than 2.36: more than the three symbols are missing, nothing can be done here
  assert.match(native.install({ glibc: [2, 35] }), /^skipped: glibc 2\.35 \(the binary needs glibc 2\.36 or newer\)/)
  // no C compiler: nothing half-made is left
  assert.match(native.install({ glibc: [2, 36], cc: join(dir, 'no-such-cc') }), /^skipped: cannot build the glibc 2\.38 shim .*no C compiler/)
  assert.equal(existsSync(join(build, name)), false)

  // glibc 2.36: the weak copy and the shim, the package's binary untouched
  assert.equal(native.install({ glibc: [2, 36] }), 'patched')
  assert.equal(sha256(join(build, name)), rec.weak, 'the patched copy is the recorded one')
  assert.ok(existsSync(join(build, 'libisoc23.so')))
  assert.equal(sha256(orig), rec.sha256, 'the package\'s own binary is unchanged')
  const readelf = execFileSync('readelf', ['-V', join(build, name)], { encoding: 'utf8' })
  assert.match(readelf, /Name: GLIBC_2\.38\s+Flags: WEAK/)
  assert.doesNotMatch(execFileSync('readelf', ['-V', orig], { encoding: 'utf8' }), /GLIBC_2\.38\s+Flags: WEAK/)
  // idempotent: a second run keeps what is there
  const mtime = statSync(join(build, name)).mtimeMs
  assert.equal(native.install({ glibc: [2, 36] }), 'kept')
  assert.equal(statSync(join(build, name)).mtimeMs, mtime)
  // a copy that is not the recorded one is made again
  writeFileSync(join(build, name), 'junk')
  assert.equal(native.install({ glibc: [2, 36] }), 'patched')
  assert.equal(sha256(join(build, name)), rec.weak)
  // a glibc upgrade to 2.38: the copy is not needed any more
  assert.equal(native.install({ glibc: [2, 38] }), 'as-is')
  assert.equal(existsSync(build), false)

  // a binary that is not the recorded one is refused, on every glibc
  const bad = readFileSync(orig)
  bad.writeUInt8(bad.readUInt8(bad.length - 1) ^ 1, bad.length - 1)
  writeFileSync(orig, bad)
  assert.throws(() => native.install({ glibc: [2, 36] }), /sha256 [0-9a-f]{64} is not the recorded/)
  assert.throws(() => native.install({ glibc: [2, 38] }), /sha256 [0-9a-f]{64} is not the recorded/)
})

/** Runs `lb run` from a copy of lb; returns its exit status and stderr. */
function runCopy (dir: string): { status: number | null, stderr: string } {
  writeFileSync(join(dir, 'lb.toml'), '[entrypoints.web]\naddress = "192.0.2.1:8080"\n[routers.r]\nrule = "PathPrefix(`/`)"\nservice = "s"\n[services.s]\n[[services.s.servers]]\naddress = "127.0.0.1:2"\n')
  const r = spawnSync(process.execPath, [join(dir, 'dist', 'core', 'cli.js'), 'run', '-c', join(dir, 'lb.toml')], { cwd: dir, encoding: 'utf8', timeout: 30_000 })
  return { status: r.status, stderr: r.stderr }
}

const SUPPORTED = /; lb runs on Node\.js 20, 22 or 24 LTS \(or 25\) on Linux x64\/arm64 with glibc 2\.38 or newer \(2\.36 and 2\.37 once lb's install step has patched its copy, which needs a C compiler\), macOS or Windows/

test('lb refuses to start with one line when uWebSockets.js has no binary for this Node (an unsupported version)', async (t) => {
  const dir = copyLb(t, () => false)
  const r = runCopy(dir)
  assert.equal(r.status, 1)
  const lines = r.stderr.trim().split('\n')
  assert.equal(lines.length, 1, r.stderr)
  const line = JSON.parse(lines[0]!) as { msg: string, code: string }
  assert.equal(line.code, 'LB_ERR_UWS_UNSUPPORTED')
  assert.match(line.msg, new RegExp(`^uWebSockets\\.js 20\\.57\\.0 cannot run on Node\\.js ${process.version} \\(ABI ${process.versions.modules}\\) on ${process.platform} ${process.arch}`))
  assert.match(line.msg, /Cannot find module/)
  assert.match(line.msg, SUPPORTED)
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace')
})

test('on glibc 2.36-2.37 without lb\'s patched copy (the install step did not run), lb refuses with one line naming the fix', async (t) => {
  const native = await load(ROOT)
  const glibc = native.glibcVersion()
  if (glibc === null || glibc[0] !== 2 || glibc[1] < 36 || glibc[1] > 37) {
    t.skip(`glibc ${glibc?.join('.') ?? 'none'}: the package's binary loads as it is here`)
    return
  }
  const name = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`
  const dir = copyLb(t, (f) => f === name)
  let r = runCopy(dir)
  assert.equal(r.status, 1)
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
  const msg = (JSON.parse(r.stderr) as { msg: string }).msg
  assert.match(msg, /version `GLIBC_2\.38' not found/)
  assert.match(msg, new RegExp(`\\(run \`node ${join(dir, 'scripts', 'uws-native.mjs').replaceAll('.', '\\.')}\` to patch lb's copy\\)`))
  assert.match(msg, SUPPORTED)
  // the named fix works: after it lb loads uWS (and fails only on its address, which is not this host's)
  execFileSync(process.execPath, [join(dir, 'scripts', 'uws-native.mjs')])
  r = runCopy(dir)
  assert.doesNotMatch(r.stderr, /LB_ERR_UWS_UNSUPPORTED/)
  assert.match(r.stderr, /LB_ERR_LISTEN|cannot listen/)
})
