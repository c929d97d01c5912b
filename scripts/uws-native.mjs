#!/usr/bin/env node
// lb's install step for uWebSockets.js (package.json "install" script; plain
// JavaScript because it runs before `npm run build`). It checks the sha256 of
// the native binary this Node will load against native/uws.json and, only on
// Linux with glibc 2.36 or 2.37 (Debian 12: 2.36), makes lb's own loadable copy:
//
//   native/build/<version>/<binary>   the package's binary with its GLIBC_2.38
//                                     version need marked weak (one flag bit)
//   native/build/<version>/libisoc23.so  native/isoc23-shim.c built with cc
//
// core/worker/transport/uws/native.ts loads the shim RTLD_GLOBAL, then that copy with RTLD_NOW.
// It also builds native/build/fd-peek.node (native/fd-peek.c, Linux, any
// glibc) for the https entry points with HTTP/2; without a C compiler lb works
// without it (buildPeek below).
//
// Nothing outside lb's folder is written; the package's own files are never
// changed. Idempotent: a copy whose sha256 is already the recorded one is kept.
// With glibc 2.38 or newer, macOS or Windows the package's binary loads as it
// is and nothing is built. When nothing can be made (no cc, glibc < 2.36, a Node
// without a binary) the install still succeeds: `lb` then refuses to start
// with one line naming the systems and Node versions that work.
//
//   node scripts/uws-native.mjs            install step (exit 1 only on a sha256 mismatch)
//   node scripts/uws-native.mjs --hashes   print the sha256 of every binary (and of each Linux one's weak copy)
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const MANIFEST = join(ROOT, 'native', 'uws.json')

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex')

/** glibc version of this process as [major, minor], or null when not glibc (musl, macOS, Windows). */
export function glibcVersion () {
  const v = process.report.getReport().header.glibcVersionRuntime
  if (typeof v !== 'string') return null
  const m = /^(\d+)\.(\d+)/.exec(v)
  return m === null ? null : [Number(m[1]), Number(m[2])]
}

/** What this system needs: 'as-is' (the binary loads unchanged), 'weak' (glibc 2.36-2.37: the shim) or 'none' (it cannot load). */
export function plan (glibc = glibcVersion()) {
  if (process.platform !== 'linux') return 'as-is'
  if (glibc === null) return 'none' // musl: the binaries link against glibc
  const [major, minor] = glibc
  if (major > 2 || minor >= 38) return 'as-is'
  // arc4random came with 2.36: older glibc lacks more than three functions
  return minor >= 36 ? 'weak' : 'none'
}

/**
 * Marks the version need `name` (e.g. GLIBC_2.38) weak in an ELF64
 * little-endian shared object, in place: VER_FLG_WEAK (2) in vna_flags of
 * each matching Vernaux entry of .gnu.version_r. The dynamic linker then loads
 * the object when no library defines that version and binds its symbols to
 * whichever loaded library defines them unversioned. Returns how many entries
 * it marked (0 when they already were); throws on anything but ELF64 LE.
 */
export function markVersionWeak (buf, name) {
  if (buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2 || buf[5] !== 1) throw new Error('not an ELF64 little-endian file')
  const shoff = Number(buf.readBigUInt64LE(0x28))
  const shentsize = buf.readUInt16LE(0x3a)
  const shnum = buf.readUInt16LE(0x3c)
  const section = (i) => {
    const at = shoff + i * shentsize
    return { type: buf.readUInt32LE(at + 4), offset: Number(buf.readBigUInt64LE(at + 0x18)), link: buf.readUInt32LE(at + 0x28), info: buf.readUInt32LE(at + 0x2c) }
  }
  let marked = 0
  let found = false
  for (let i = 0; i < shnum; i++) {
    const s = section(i)
    if (s.type !== 0x6ffffffe) continue // SHT_GNU_verneed
    found = true
    const strtab = section(s.link).offset
    const str = (off) => buf.toString('latin1', strtab + off, buf.indexOf(0, strtab + off))
    let vn = s.offset
    for (let n = 0; n < s.info; n++) {
      const cnt = buf.readUInt16LE(vn + 2)
      let aux = vn + buf.readUInt32LE(vn + 8)
      for (let k = 0; k < cnt; k++) {
        const flags = buf.readUInt16LE(aux + 4)
        if (str(buf.readUInt32LE(aux + 8)) === name && (flags & 2) === 0) {
          buf.writeUInt16LE(flags | 2, aux + 4)
          marked++
        }
        aux += buf.readUInt32LE(aux + 12)
      }
      vn += buf.readUInt32LE(vn + 12)
    }
  }
  if (!found) throw new Error('no .gnu.version_r section')
  return marked
}

export function manifest () {
  return JSON.parse(readFileSync(MANIFEST, 'utf8'))
}

/** Folder of the installed uWebSockets.js package (lb's dependency alias). */
export function packageDir () {
  return dirname(createRequire(join(ROOT, 'package.json')).resolve('uWebSockets.js'))
}

export function binaryName () {
  return `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`
}

/** lb's folder for the weak copy and the shim of this uWS version. */
export function buildDir (m = manifest()) {
  return join(ROOT, 'native', 'build', m.version)
}

/** Writes a file whole or not at all (a crash mid-write leaves no half binary behind). */
function writeAtomic (path, data) {
  writeFileSync(path + '.tmp', data)
  renameSync(path + '.tmp', path)
}

/**
 * The install step; returns what it did, for the log and the tests:
 * 'as-is', 'patched', 'kept' (already patched), or 'skipped: <why>'.
 * Throws on a binary whose sha256 is not the recorded one. Every binary of
 * this platform and architecture is checked and, on glibc 2.36-2.37, copied:
 * a Node of another ABI on the same machine (a second install, an upgrade, or
 * a service started with the system's Node) finds its copy too.
 */
export function install ({ glibc = glibcVersion(), cc = process.env.CC || 'cc', log = () => {} } = {}) {
  const m = manifest()
  const own = binaryName()
  if (m.binaries[own] === undefined) return `skipped: no ${own} in uWebSockets.js ${m.version} (Node ${process.versions.node}, ABI ${process.versions.modules})`
  const pkg = packageDir()
  const prefix = `uws_${process.platform}_${process.arch}_`
  const origs = new Map()
  for (const name of readdirSync(pkg).filter((f) => f.startsWith(prefix) && f.endsWith('.node')).sort()) {
    const rec = m.binaries[name]
    if (rec === undefined) continue
    const orig = readFileSync(join(pkg, name))
    if (sha256(orig) !== rec.sha256) throw new Error(`${name}: sha256 ${sha256(orig)} is not the recorded ${rec.sha256} (native/uws.json)`)
    origs.set(name, orig)
  }
  const p = plan(glibc)
  const dir = buildDir(m)
  if (p === 'as-is') {
    rmSync(dir, { recursive: true, force: true }) // a copy from before a glibc upgrade is not needed any more
    return 'as-is'
  }
  if (p === 'none') return `skipped: glibc ${glibc === null ? 'not found' : glibc.join('.')} (the binary needs glibc 2.36 or newer)`
  const shim = join(dir, 'libisoc23.so')
  const current = (name) => existsSync(join(dir, name)) && sha256(readFileSync(join(dir, name))) === m.binaries[name].weak
  if (existsSync(shim) && [...origs.keys()].every(current)) return 'kept'
  const failed = buildShared(cc, join(ROOT, 'native', 'isoc23-shim.c'), shim, [], log)
  if (failed !== null) return `skipped: cannot build the glibc 2.38 shim with ${cc} (${failed})`
  for (const [name, orig] of origs) {
    const buf = Buffer.from(orig)
    markVersionWeak(buf, 'GLIBC_2.38')
    if (sha256(buf) !== m.binaries[name].weak) throw new Error(`${name}: patched sha256 ${sha256(buf)} is not the recorded ${m.binaries[name].weak} (native/uws.json)`)
    writeAtomic(join(dir, name), buf)
  }
  return 'patched'
}

/**
 * Builds native/build/fd-peek.node from native/fd-peek.c (Linux only; core/net/fd-peek.ts says what it is for)
 * with the Node-API headers of the node-api-headers package. Returns 'built', 'kept' (up to date) or
 * 'skipped: <why>'; never throws: without it lb terminates those connections in node:tls, as before.
 */
export function buildPeek ({ cc = process.env.CC || 'cc', log = () => {} } = {}) {
  if (process.platform !== 'linux') return `skipped: ${process.platform}`
  const src = join(ROOT, 'native', 'fd-peek.c')
  const out = join(ROOT, 'native', 'build', 'fd-peek.node')
  if (existsSync(out) && statSync(out).mtimeMs >= statSync(src).mtimeMs) return 'kept'
  let include
  try {
    include = join(dirname(createRequire(join(ROOT, 'package.json')).resolve('node-api-headers/package.json')), 'include')
  } catch {
    return 'skipped: the node-api-headers package is not installed'
  }
  const failed = buildShared(cc, src, out, ['-I', include], log)
  return failed === null ? 'built' : `skipped: cannot build it with ${cc} (${failed})`
}

/** Compiles `src` into the shared object `out`, whole or not at all; null, or why it could not. */
function buildShared (cc, src, out, args, log) {
  mkdirSync(dirname(out), { recursive: true })
  try {
    log(`building ${out} with ${cc}`)
    execFileSync(cc, ['-O2', '-shared', '-fPIC', ...args, '-o', out + '.tmp', src], { stdio: ['ignore', 'ignore', 'pipe'] })
    renameSync(out + '.tmp', out)
    return null
  } catch (err) {
    rmSync(out + '.tmp', { force: true })
    return err.code === 'ENOENT' ? 'no C compiler' : String(err.stderr ?? err.message).trim().split('\n')[0]
  }
}

function printHashes () {
  const dir = packageDir()
  const out = {}
  for (const f of readdirSync(dir).filter((f) => /^uws_.*\.node$/.test(f)).sort()) {
    const buf = readFileSync(join(dir, f))
    const sha = sha256(buf)
    if (!f.startsWith('uws_linux_')) {
      out[f] = { sha256: sha }
      continue
    }
    markVersionWeak(buf, 'GLIBC_2.38')
    out[f] = { sha256: sha, weak: sha256(buf) }
  }
  process.stdout.write(JSON.stringify(out, null, 2) + '\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] === '--hashes') {
    printHashes()
  } else {
    try {
      const what = install({ log: (s) => process.stdout.write(`lb: ${s}\n`) })
      process.stdout.write(`lb: uWebSockets.js native binary: ${what}\n`)
      process.stdout.write(`lb: native/build/fd-peek.node: ${buildPeek({ log: (s) => process.stdout.write(`lb: ${s}\n`) })}\n`)
    } catch (err) {
      process.stderr.write(`lb: ${err.message}\n`)
      process.exit(1)
    }
  }
}
